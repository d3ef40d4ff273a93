"""Each notebook's test parameters and the checks of its recorded results (nbNN.py), and what they share."""


def prediction(r: dict, given, measured) -> None:
    """The Predict step, recorded: what was predicted (None: nothing given), what the run measured, and whether
    they match (None when nothing was predicted)."""
    assert r["prediction"] == given and r["prediction_measured"] == measured, r
    assert r["prediction_right"] == (None if given is None else given == measured), r
