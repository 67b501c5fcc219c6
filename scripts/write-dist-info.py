"""Write this project's distribution metadata (its name, version and entry points, read from pyproject.toml) into
FOLDER: a checkout run from src/ on PYTHONPATH without pip install (the GPU hosts, which have no registry) then finds
the studies' registrations (entry points of group repro.plugins) as an installed checkout does. Put FOLDER on
PYTHONPATH; where the project is installed too, Python reads the first distribution of the name it finds.
Usage: python3 scripts/write-dist-info.py FOLDER"""

import sys
import tomllib
from pathlib import Path

if len(sys.argv) != 2:
    sys.exit(__doc__.rsplit("Usage: ", 1)[1])
project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
dist = Path(sys.argv[1]) / f"{project['name']}-{project['version']}.dist-info"
dist.mkdir(parents=True, exist_ok=True)
(dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
groups = project.get("entry-points", {})
(dist / "entry_points.txt").write_text(
    "".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items()) + "\n"
        for group, points in groups.items()
    )
)
