import pytest

from retrieval.search.fusion.normalize import min_max, normalize, z_score


def test_min_max_hand_values():
    assert min_max([12.0, 6.0, 2.0]) == pytest.approx([1.0, 0.4, 0.0])
    assert min_max([3.0, 3.0]) == [1.0, 1.0]
    assert min_max([7.5]) == [1.0]
    assert min_max([]) == []


def test_z_score_population_std():
    # mean 2, population std sqrt(2/3)
    assert z_score([1.0, 2.0, 3.0]) == pytest.approx([-1.224744871391589, 0.0, 1.224744871391589])
    assert z_score([5.0, 5.0]) == [0.0, 0.0]


def test_normalize_dispatch_and_error():
    assert normalize([1.0, 3.0], "none") == [1.0, 3.0]
    assert normalize([1.0, 3.0], "minmax") == [0.0, 1.0]
    with pytest.raises(ValueError, match="unknown normalisation"):
        normalize([1.0], "softmax")


def test_l2_divides_by_the_euclidean_length():
    from retrieval.search.fusion.normalize import l2

    assert l2([3.0, 4.0]) == [0.6, 0.8]
    assert l2([0.0, 0.0]) == [0.0, 0.0]
    assert l2([]) == []
