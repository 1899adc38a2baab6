"""Finding 16 (issue 29): the image build copied untracked, non-ignored files of the
builder's checkout into the image (`git ls-files --others`): a stray `.env.prod`, a dump or
a key file lying in the tree went into /app.

deploy/image/sources.sh is the build's file-selection step (build.sh copies exactly what
it prints): the tracked files of the work tree (their current content, so a build tests
uncommitted edits), never an untracked one, minus what the image does not need. The
image build itself is slow; tests/install/test_image.py builds it."""

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "deploy" / "image" / "sources.sh"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def selected(repo: Path) -> set[str]:
    result = subprocess.run([str(SOURCES), str(repo)], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    return {name for name in result.stdout.decode().split("\0") if name}


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A small checkout: tracked, modified, staged, deleted, untracked and ignored files."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "--quiet")
    files = {"manage.py": "print('ok')\n", "app/models.py": "X = 1\n", "app/gone.py": "",
             "tests/test_app.py": "", "docs/index.md": "", ".gitignore": "*.log\nvar/\n",
             "name with spaces.txt": "kept\n"}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "init")
    (repo / "app/models.py").write_text("X = 2\n")      # modified, not committed
    (repo / "app/staged.py").write_text("")             # new and added to the index
    git(repo, "add", "app/staged.py")
    (repo / "app/gone.py").unlink()                     # deleted from the work tree
    (repo / ".env.prod").write_text("SECRET_KEY=real\n")  # untracked, not ignored
    (repo / "app/id_rsa").write_text("PRIVATE KEY\n")     # untracked, not ignored
    (repo / "dump.sql").write_text("COPY users\n")        # untracked, not ignored
    (repo / "build.log").write_text("")                   # ignored
    return repo


def test_finding_16_the_image_gets_no_untracked_file(checkout):
    chosen = selected(checkout)
    assert not {"app/id_rsa", "dump.sql", ".env.prod", "build.log"} & chosen, chosen
    assert chosen == {"manage.py", "app/models.py", "app/staged.py", "name with spaces.txt"}


def test_finding_16_this_checkout_gives_only_its_tracked_files():
    """On the real tree: a subset of what git tracks, and every tracked module of the apps."""
    chosen = selected(REPO)
    tracked = set(git(REPO, "ls-files", "-z").split("\0")) - {""}
    untracked = set(git(REPO, "ls-files", "-z", "--others", "--exclude-standard").split("\0")) - {""}
    assert chosen <= tracked, sorted(chosen - tracked)[:10]
    assert not chosen & untracked
    assert {"manage.py", "pyproject.toml", "gpuplatform/settings.py", "gpuplatform/wsgi.py"} <= chosen
    assert not [name for name in chosen if name.startswith(("tests/", "docs/", "deploy/", "var/", "."))]


def test_finding_16_build_sh_copies_what_sources_sh_selects():
    """build.sh takes its context from sources.sh, not a selection of its own."""
    build = (REPO / "deploy" / "image" / "build.sh").read_text()
    assert "deploy/image/sources.sh" in build
    assert "--others" not in build
