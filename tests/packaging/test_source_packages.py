"""The source tarballs and the wheel hold mjf-hooks alone: none of tests/vendor/, the
test-only sources of other projects under their own licences (OpenPBS, AGPL-3.0) that a
clone has and the integration tests build, while debian/copyright and the RPM's License
say Apache-2.0 for all they hold. Each is built here from a clean clone's tree, as a
packager builds it; they keep the unit tests, which run at build time. (The SRPM and
the binary packages: test_rpm.py, test_deb.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import require, run
from tests.packaging.sources import clean_copy, not_ours, package_version


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    copy = clean_copy(tmp_path_factory.mktemp("source") / "mjf-hooks")
    assert (copy / "tests/vendor/openpbs/openpbs-src.tar.gz").is_file()  # as a clone has it
    return copy


def tarball_names(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return [member.name for member in tar.getmembers() if not member.isdir()]


def test_the_debian_source_package_holds_no_vendored_source(source, tmp_path):
    require(shutil.which("dpkg-source") is not None, "needs dpkg-source (apt-get install dpkg-dev)")
    built = shutil.copytree(source, tmp_path / "mjf-hooks", symlinks=True)
    run(["dpkg-source", "-b", "mjf-hooks"], cwd=tmp_path)
    (tarball,) = tmp_path.glob(f"mjf-hooks_{package_version()}.tar.*")
    names = tarball_names(tarball)
    assert not_ours(names, {"mjf-hooks/LICENSE", "mjf-hooks/debian/copyright"}) == []
    assert "mjf-hooks/tests/unit/test_spec.py" in names
    assert (built / "tests/vendor").is_dir()  # the tree it was built from is left as it was


def test_the_sdist_and_the_wheel_hold_no_vendored_source(source, tmp_path):
    require(subprocess.run([sys.executable, "-c", "import setuptools"]).returncode == 0,
            "needs setuptools in the test environment")
    run([sys.executable, "-c", "import sys, setuptools.build_meta as build\n"
         "build.build_sdist(sys.argv[1])", str(tmp_path)], cwd=source, timeout=180)
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(tmp_path), str(source)], timeout=180)
    top = f"mjf-hooks-{package_version()}"
    names = tarball_names(tmp_path / f"{top}.tar.gz")
    assert not_ours(names, {f"{top}/LICENSE"}) == []
    assert f"{top}/tests/unit/test_spec.py" in names and f"{top}/CHANGELOG.md" in names
    (wheel,) = tmp_path.glob("mjf_hooks-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        wheel_names = archive.namelist()
    dist_info = f"mjf_hooks-{package_version()}.dist-info"
    # (setuptools 68 puts the licence at the top of .dist-info, later ones in licenses/)
    ours = {f"{dist_info}/LICENSE", f"{dist_info}/licenses/LICENSE"}
    assert not_ours(wheel_names, ours) == []
    assert not [name for name in wheel_names if name.startswith("tests/")]
