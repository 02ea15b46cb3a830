"""Evaluation jobs and the pools that run them (layer 2: below bench, synth and rl).

`jobs.EvalJob` names one evaluation; `local.LocalPool` runs jobs on local worker
processes (one per GPU plus a CPU compile farm); `ray_pool.RayPool` runs them as
Ray tasks; `local.make_pool` picks one. Every caller that needs many evaluations
(the benchmark, task synthesis, RL rollouts) goes through this one API.
"""
