"""py-spy sampling of the stack's processes during a benchmark, summarised as text.

`bench_clusters --profile DIR` attaches `py-spy record --format raw` (collapsed stacks) to every
raybus process from apply to all-ready and prints, per process, the functions with the most
samples on-CPU by self time and by inclusive time: the flame graph as a table, so two runs can be
compared in a note. py-spy is a dev dependency (requirements.lock).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path


class Profiler:
    def __init__(self, out: Path, pids: dict[str, int], rate: int = 100) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        out.mkdir(parents=True, exist_ok=True)
        self.files = {name: out / f"{name}.txt" for name in pids}
        # --idle off: only samples where the thread was running count (CPU, not waiting).
        self.procs = [subprocess.Popen([exe, "record", "--format", "raw", "--rate", str(rate),
                                        "--nonblocking", "-o", str(self.files[name]), "-p", str(pid)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                      for name, pid in pids.items()]

    def stop(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()

    def report(self, top: int = 15) -> None:
        for name, path in self.files.items():
            if path.exists():
                print(summarise(name, path.read_text(), top))


def _frame(f: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py)": lines vary, functions do not.
    func, _, where = f.partition(" (")
    return f"{func} ({where.rsplit('/', 1)[-1].split(':', 1)[0]})" if where else func


def summarise(name: str, raw: str, top: int = 15) -> str:
    self_t: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";") if f]
        total += n
        if frames:
            self_t[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    lines = [f"--- {name}: {total} samples"]
    if total:
        lines.append("  self%   incl%  function")
        for f, n in self_t.most_common(top):
            lines.append(f"  {100 * n / total:5.1f}  {100 * incl[f] / total:6.1f}  {f}")
        lines.append("  inclusive, top (excluding the event loop plumbing):")
        shown = 0
        for f, n in incl.most_common():
            if any(k in f for k in ("_run_once", "run_forever", "run_until_complete", "<module>",
                                    "_run (events.py)", "_run_module", "run (runners.py)")):
                continue
            lines.append(f"  {100 * n / total:6.1f}  {f}")
            shown += 1
            if shown >= top:
                break
    return "\n".join(lines)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(summarise(Path(arg).stem, Path(arg).read_text()))
