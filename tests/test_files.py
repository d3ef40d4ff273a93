"""lab.runtime.files: what another process reads is whole or absent, and nothing is left beside it."""
import pytest

from lab.runtime.files import aside, into_place, replacing, write_shared


def test_a_write_replaces_the_file_whole_and_a_failed_one_leaves_the_old_and_no_leftover(tmp_path):
    path = tmp_path / "deep" / "jars.lock"
    with replacing(path) as tmp:
        tmp.write_text("one")
        assert not path.exists()   # nothing to read until the block ends
    assert path.read_text() == "one"
    with pytest.raises(RuntimeError):
        with replacing(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert path.read_text() == "one" and sorted(p.name for p in path.parent.iterdir()) == ["jars.lock"]


def test_a_shared_file_is_rewritten_only_when_it_differs(tmp_path):
    path = tmp_path / "log4j.properties"
    write_shared(path, "a")
    before = path.stat().st_ino
    write_shared(path, "a")
    assert path.stat().st_ino == before
    write_shared(path, "b")
    assert path.read_text() == "b"


def test_a_folder_made_aside_goes_into_place_unless_another_came_first(tmp_path):
    target = tmp_path / "classes"
    made = aside(target)
    made.mkdir()
    (made / "A.class").write_text("x")
    assert into_place(made, target) and (target / "A.class").exists() and not made.exists()
    second = aside(target)
    second.mkdir()
    (second / "A.class").write_text("y")
    assert into_place(second, target) is False and not second.exists()
    assert (target / "A.class").read_text() == "x"
