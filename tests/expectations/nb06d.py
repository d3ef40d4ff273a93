"""Lesson 06d, a downstream reader of a changelog ("Tales from running Kafka Streams in Production")."""
from tests.expectations import exercises, prediction

# Two versions of the counting app, 2 s of input each, its downstream on the internal changelog. Its control is the
# Mitigate step: the explicit store and output topic alone, judged by the lesson's own audit.
PARAMETERS = {
    "CHANGELOG_PHASE_S": 2,
    "FIX": {"changelog_variants": ["explicit"]},
    "PREDICTION": None,   # the widget's path: no prediction made
}


def clean_views(views, variant):
    for name, view in views.items():
        if name.startswith(f"{variant}/"):
            assert view["lost"] == 0 and view["stale_value"] == 0 and view["duplicate"] == 0, (name, view)
            assert view["read"] == view["written"] > 0, (name, view)


def check(results):
    assert results["failure_reproduced"] is True
    prediction(results, None, "none of them")     # the internal changelog's live reader
    rows = results["changelog"]
    assert list(rows) == ["internal"], list(rows)   # the question's run: the internal changelog alone
    internal = rows["internal"]
    assert internal["change"] == "mapValues", internal
    # A harmless change renamed the store and its changelog: the downstream of the old one missed version 2.
    assert internal["store_renamed"] is True and internal["changelog_v1"] != internal["changelog_v2"], internal
    assert internal["inputs_v2"] > 0 and internal["live_lost"] >= internal["inputs_v2"] > 0, internal
    # The late reader of the compacted changelog misses the intermediate values too.
    assert internal["late_lost"] > internal["live_lost"] and internal["cleaner_ran"] is True, internal

    # The Mitigate step: a named store and an output topic written with to(): nothing moved, nothing missed.
    fixed = results["mitigation"]
    assert fixed["clean"] is True and list(fixed["changelog"]) == ["explicit"], fixed["verdict"]
    explicit = fixed["changelog"]["explicit"]
    assert explicit["store_renamed"] is False and explicit["changelog_v1"] == explicit["changelog_v2"], explicit
    assert explicit["inputs_v2"] > 0 and explicit["live_lost"] == 0, explicit
    clean_views(fixed["changelog_views"], "explicit")

    # The exercise: version 3's changelog, version 2's with the store's number one up.
    answers = exercises(results, [1])
    v2 = internal["changelog_v2"]
    number = int(v2[-len("0000000002-changelog"):-len("-changelog")])
    assert answers[1] == f"{v2[:-len('0000000002-changelog')]}{number + 1:010d}-changelog", (answers, v2)
