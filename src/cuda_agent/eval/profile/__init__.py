"""The expert profile (issue 32): per kernel counters and a roofline verdict; never part of a result, a reward or a cache key.

- `expert.py`    the profile of a workspace (stage, build, the child under ncu, the verdict).
- `ncu.py`       Nsight Compute: the command, its fixed metric list, its CSV read back.
- `resources.py` what the compiler says about each kernel (registers, spills, shared memory).
- `roofline.py`  the GPU's ceilings, measured once per GPU model, and the roofline verdict.
The program the candidate runs under the profiler is `child/profiling.py`."""
