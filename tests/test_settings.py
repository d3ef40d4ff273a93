"""One way to hand a program its settings: a properties file, its one argument, for Java (Lab.load) and Python
(lab.apps.settings) programs alike."""
import argparse

import pytest

from lab.apps import consumer_app, settings
from lab.runtime.programs import settings_file


def test_a_python_program_reads_the_file_the_launcher_writes(tmp_path):
    path = settings_file(tmp_path, "billing-0", {
        "bootstrap.servers": "127.0.0.1:9092", "lab.topic": "in", "lab.group": "billing", "lab.app": "billing",
        "lab.history": tmp_path / "h", "lab.run.id": "r1", "lab.incarnation": 2, "lab.work.ms": 2.5,
        "lab.pause": True, "lab.output.topic": "café=out:1"}, java=False)
    assert path == tmp_path / "billing-0.properties" and (path.stat().st_mode & 0o777) == 0o600
    args = consumer_app.parse_args([str(path)])
    assert (args.bootstrap, args.topic, args.run_id, args.incarnation, args.work_ms) == \
        ("127.0.0.1:9092", "in", "r1", 2, 2.5)
    assert args.pause is True and args.output_topic == "café=out:1" and args.history == str(tmp_path / "h")
    assert args.reset == "earliest" and args.dedupe_db is None   # defaults as before


def test_a_false_flag_is_absent_and_an_unknown_or_missing_setting_is_refused(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--offsets-first", action="store_true")
    ok = settings_file(tmp_path, "a", {"bootstrap.servers": "h:1", "lab.offsets.first": False}, java=False)
    assert settings.parse(parser, [str(ok)]).offsets_first is False
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--output-topic")
    ok = settings_file(tmp_path, "a", {"bootstrap.servers": "h:1", "lab.output.topic": "-out"}, java=False)
    assert settings.parse(parser, [str(ok)]).output_topic == "-out"   # a value, not an option
    for bad, said in [({"bootstrap.servers": "h:1", "lab.nope": 1}, "lab.nope is not a setting"),
                      ({"lab.offsets.first": True}, "missing setting bootstrap.servers"),
                      ({"bootstrap.servers": "h:1", "lab.batch": "ten"}, "lab.batch: invalid int value: 'ten'"),
                      ({"group.id": "g", "bootstrap.servers": "h:1"}, "group.id is not a setting")]:
        with pytest.raises(SystemExit):
            settings.parse(parser, [str(settings_file(tmp_path, "b", bad, java=False))])
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit):
        settings.parse(parser, ["--bootstrap", "h:1"])   # flags are not the way in any more
    with pytest.raises(SystemExit):
        settings.parse(parser, [str(tmp_path / "none.properties")])
    assert "cannot read its settings" in capsys.readouterr().err
