"""What the remote checks share: ending a launcher's or an agent's whole process group."""
import os
import signal
import subprocess


def end_group(process: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM to the group that `process` leads (started with start_new_session), then
    SIGKILL to it if it has not ended within `grace` seconds."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
