"""What every path reads of chips and pods (ChipInfo, PodView, ChipHealth), a 950 chip's URMA EIDs
(ChipInfo carries them) and the natural order of device ids. Pure: the bottom of the plugin."""
