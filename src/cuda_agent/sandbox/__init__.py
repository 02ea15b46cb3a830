"""The one sandbox for untrusted processes: evaluation candidates and the agent's shell (layer 0).

`box.Sandbox` and `box.probe` wrap a command in namespaces, locked read-only mounts and
resource limits (`box`'s docstring lists what is and is not isolated); `fs_lock` is the script
that runs first inside the namespaces; `env.scrubbed_env` and `env.kill_group` give every
sandboxed tree the same environment allow-list and the same end.
"""

from cuda_agent.sandbox.box import FS_LOCK, LAYERS, Sandbox, probe, profile_for
from cuda_agent.sandbox.env import ENV_ALLOW, kill_group, scrubbed_env

__all__ = ["ENV_ALLOW", "FS_LOCK", "LAYERS", "Sandbox", "kill_group", "probe", "profile_for", "scrubbed_env"]
