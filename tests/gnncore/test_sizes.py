"""Sizes as the command line and configs take them."""

import pytest

from gnncore.sizes import format_size, parse_size

MiB = 2**20


def test_parse_size():
    assert parse_size("8GiB") == 8 * 2**30
    assert parse_size("512M") == 512 * MiB
    assert parse_size("1.5 gib") == 3 * 2**29
    assert parse_size("4096") == 4096
    for bad in ("8GB", "lots", "", "-1G"):
        with pytest.raises(ValueError, match="not a size"):
            parse_size(bad)
    with pytest.raises(ValueError, match="zero"):
        parse_size("0MiB")


def test_format_size():
    assert format_size(512) == "512 B"
    assert format_size(3 * 2**29) == "1.5 GiB"
