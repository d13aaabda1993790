"""The simulated chip backend: a whole Ascend node in memory, scriptable for drills.

`SimBackend(profile, clock=None, seed=0, subscription=True)` implements the Backend protocol
for one of `PROFILES` and adds a control surface (inject_fault, burst, drop_card, set_network,
hang/release, set_processes, fail_next_reset, switch_fault) used by tests, the exporter's sim
API and scenario files (`load_scenario`, `ScenarioRunner` in `.scenario`: imported only when a
scenario runs, since it brings YAML and its own models to a process that usually has none).
"""

from dcmi_exporter.backends.sim.backend import SimBackend
from dcmi_exporter.backends.sim.profiles import PROFILES, Profile, get_profile
from dcmi_exporter.backends.sim.state import RESET_STAGES, ResetFailMode

__all__ = [
    "PROFILES",
    "RESET_STAGES",
    "Profile",
    "ResetFailMode",
    "SimBackend",
    "get_profile",
]
