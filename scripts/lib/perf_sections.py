"""The sections of docs/PERFORMANCE.md copied from the tables other scripts write.

`scripts/bench-peers` appends them when it writes the whole document; run this file on its own
(`python3 scripts/lib/perf_sections.py`) to refresh only these sections of the existing
docs/PERFORMANCE.md after one of those scripts ran again (everything from the first of these
sections to "## Logs" is replaced).
"""

import sys

# (file, section title, the command that writes the file)
SOURCES = (
    ("docs/perf/shm-sweep.md", "Shared memory across the size range (raw method, agent, MPI)",
     "scripts/bench-shm-sweep --write"),
    ("docs/perf/mpi.md", "MPI programs: the same binary on MPICH and on viaduct", "scripts/bench-mpi --write"),
    ("docs/perf/cluster.md", "Across two nodes of the one-machine cluster", "scripts/bench-cluster --write"),
    ("docs/perf/collectives-osu.md", "Collectives against MPICH by the OSU procedure",
     "scripts/bench-coll-osu --write"),
    ("docs/perf/threads.md", "A sleeping thread and another thread's posts",
     "scripts/bench-threads --write"),
)


def lines():
    """The Markdown lines of every section whose file exists."""
    out = []
    for path, title, script in SOURCES:
        try:
            text = open(path).read().splitlines()
        except OSError:
            continue
        rows = []
        for l in text:
            if l.startswith("|") or l.startswith("!["):
                rows.append(l)
            elif rows and rows[-1] != "":
                rows.append("")  # tables stay apart
        while rows and rows[-1] == "":
            rows.pop()
        # A plot next to the file is linked from docs/ (one folder up from docs/perf/).
        rows = [l.replace("](", "](perf/", 1) if l.startswith("![") else l for l in rows]
        out += [f"## {title}", "",
                f"From `{path}` (written by `{script}`; the commands, date and load of that run are there):",
                ""]
        out += rows + [""]
    return out


def refresh(doc="docs/PERFORMANCE.md"):
    text = open(doc).read().splitlines()
    titles = {f"## {t}" for _, t, _ in SOURCES}
    start = next((i for i, l in enumerate(text) if l in titles), None)
    end = next((i for i, l in enumerate(text) if l == "## Logs"), len(text))
    if start is None:
        start = end
    text[start:end] = lines()
    open(doc, "w").write("\n".join(text) + "\n")


if __name__ == "__main__":
    refresh(*(sys.argv[1:2]))
    print("refreshed the copied sections of docs/PERFORMANCE.md")
