"""How much each scenario measures: the full run, and --quick for a smoke run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    quick: bool
    fault_rounds: int  # fault -> kubelet samples per stack
    rereg_rounds: int  # kubelet restarts
    alloc_rounds: int  # plain Allocate calls
    volcano_pods: int  # Volcano Allocate calls (one pending pod each), per pacing
    idle_s: float  # idle CPU window
    steady_s: float  # ConfigMap writes at steady state (also the full stack's idle CPU window)
    storm_s: float  # ConfigMap writes during a fault storm
    cached_pods: int  # pods in the node cache for the memory figure
    cold_starts: int
    history_events: int
    admission_rounds: int  # admissions per plugin and pacing through the kubelet's device manager
    fleet_nodes: int  # node stacks on one real API server (bench/fleet.py)
    fleet_steady_s: float  # their steady window, pods from the API server
    fleet_kubelet_steady_s: float  # and with pods from the kubelet
    fleet_background_s: float  # the API server's own traffic, before any node starts
    fleet_flap_s: float  # the sustained storm: every chip flips once a second


FULL = Plan(
    quick=False,
    fault_rounds=200,
    rereg_rounds=50,
    alloc_rounds=1000,
    volcano_pods=500,
    idle_s=20.0,
    steady_s=60.0,
    storm_s=30.0,
    cached_pods=10_000,
    cold_starts=5,
    history_events=1_000_000,
    admission_rounds=500,
    fleet_nodes=20,
    fleet_steady_s=300.0,
    fleet_kubelet_steady_s=120.0,
    fleet_background_s=60.0,
    fleet_flap_s=30.0,
)

QUICK = Plan(
    quick=True,
    fault_rounds=20,
    rereg_rounds=10,
    alloc_rounds=100,
    volcano_pods=100,
    idle_s=5.0,
    steady_s=15.0,
    storm_s=10.0,
    cached_pods=10_000,  # the figure is about 10,000; loading them takes seconds, not minutes
    cold_starts=3,
    history_events=100_000,
    admission_rounds=100,
    fleet_nodes=5,
    fleet_steady_s=60.0,
    fleet_kubelet_steady_s=30.0,
    fleet_background_s=20.0,
    fleet_flap_s=10.0,
)
