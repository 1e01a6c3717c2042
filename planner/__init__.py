"""gpuplan's planner: fair share, the epoch MIP and its backends, simulator, executors, CLI."""
