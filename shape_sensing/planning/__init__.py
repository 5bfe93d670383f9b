"""Path planning for tip-growing robots: planar Dubins paths, the 3D two-plane planner, discrete execution.

* :mod:`~shape_sensing.planning.dubins2d`: the six Dubins words, the shortest path, sampling.
* :mod:`~shape_sensing.planning.dubins3d`: the 3D planner of the seed paper (Eq. 9-25) and action triples.
* :mod:`~shape_sensing.planning.executor`: discrete growth steps, errors (Eq. 26-28), open and closed loop.
"""

from shape_sensing.planning.dubins2d import WORDS, DubinsPath2D, all_paths, shortest_path
from shape_sensing.planning.dubins3d import Action, Plan3D, Segment3D, action_triples, plan_3d
from shape_sensing.planning.errors import PlanningError
from shape_sensing.planning.executor import ExecutionResult, StepModel, execute, pose_errors, run_actions

__all__ = [
    "WORDS",
    "Action",
    "DubinsPath2D",
    "ExecutionResult",
    "Plan3D",
    "PlanningError",
    "Segment3D",
    "StepModel",
    "action_triples",
    "all_paths",
    "execute",
    "plan_3d",
    "pose_errors",
    "run_actions",
    "shortest_path",
]
