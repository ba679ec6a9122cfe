"""The production install (README, "Production") is a wheel, not the checkout: every file the
packages hold, Python or not (the admin's template and CSS, the catalog), must be in it. Once
only the catalog was, and the admin's agent page failed with TemplateDoesNotExist."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PACKAGES = ("credvault", "services", "providers")


def package_files() -> set[str]:
    """The files of the packages as the repository holds them."""
    found = set()
    for package in PACKAGES:
        for path in (BASE_DIR / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found.add(path.relative_to(BASE_DIR).as_posix())
    return found


def test_the_wheel_holds_every_file_of_the_packages(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(
        BASE_DIR,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", "var", ".git", "*.egg-info", "build", "__pycache__", ".*_cache"
        ),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    [wheel] = wheels.glob("credvault-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        held = set(archive.namelist())
    missing = sorted(package_files() - held)
    assert not missing, f"not in the wheel: {missing}"
    assert "services/templates/admin/services/readonly_tabular.html" in held
    assert "services/static/services/admin.css" in held
