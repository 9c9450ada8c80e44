"""The offline animation players of the book (attention_fw.plot.animate)."""
import re

import numpy as np
import pytest

from attention_fw.plot import animate


def _frames(html):
    return len(re.findall(r'frames\[\d+\] = "data:image/png;base64', html))


def test_trajectory_player_is_self_contained_and_has_one_frame_per_time():
    traj = np.random.default_rng(0).standard_normal((5, 4, 2)).cumsum(axis=0)
    html = animate.trajectory_animation(traj)
    assert _frames(html) == 5
    assert re.search(r'(src|href)="https?://', html) is None     # nothing to fetch: reads offline
    assert "font-awesome" not in html and html.count("<svg") == 9  # the nine player buttons


def test_frames_view_steps_through_the_values():
    seen = []
    html = animate.frames_view(lambda ax, v: (seen.append(v), ax.plot([0, v], [0, 1])), [1.0, 2.0, 3.0])
    assert _frames(html) == 3 and {1.0, 2.0, 3.0} <= set(seen)


def test_offline_player_rejects_remote_resources():
    with pytest.raises(ValueError, match="remote resource"):
        animate.offline_player('<img src="https://example.org/x.png">')
    with pytest.raises(ValueError, match="unknown player icon"):
        animate.offline_player('<i class="fa fa-rocket"></i>')


@pytest.mark.parametrize("bad", [np.zeros((3, 4)), np.zeros((3, 4, 3)), np.full((2, 3, 2), np.nan)])
def test_trajectory_animation_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="trajectory"):
        animate.trajectory_animation(bad)


def test_jshtml_checks_its_arguments():
    import matplotlib.pyplot as plt
    fig = plt.figure()
    with pytest.raises(ValueError, match="default_mode"):
        animate.jshtml(fig, lambda k: None, 2, default_mode="bounce")
    with pytest.raises(ValueError, match="frames"):
        animate.jshtml(fig, lambda k: None, 0)
    with pytest.raises(ValueError, match="values"):
        animate.frames_view(lambda ax, v: None, [])
