"""What a job is told: its directories as paths, or as the URLs url_base serves them at."""

from __future__ import annotations

from mjf_hooks.config import Config
from mjf_hooks.exports import export_lines, exports, served_url


def config(export: str = "path", url_base: str | None = "https://mjf.example/mjf") -> Config:
    conf = Config()
    conf.base_dir, conf.export, conf.url_base = "/var/run/mjf", export, url_base
    return conf


def test_a_path_of_base_dir_is_served_under_url_base_quoted_per_segment():
    assert served_url(config(), "/var/run/mjf/jobs/a b#1/jobfeatures") == \
        "https://mjf.example/mjf/jobs/a%20b%231/jobfeatures"


def test_a_path_elsewhere_or_no_url_base_has_no_url():
    assert served_url(config(), "/scratch/job/.mjf/jobfeatures") is None
    assert served_url(config(), "/var/run/mjf-other/machinefeatures") is None
    assert served_url(config(url_base=None), "/var/run/mjf/machinefeatures") is None


def test_the_variables_are_urls_only_with_export_url_and_only_where_served():
    job = "/var/run/mjf/jobs/5/jobfeatures"
    assert exports(config(), "/var/run/mjf/machinefeatures", job) == {
        "MACHINEFEATURES": "/var/run/mjf/machinefeatures", "JOBFEATURES": job}
    assert exports(config("url"), "/var/run/mjf/machinefeatures", "/scratch/.mjf/x") == {
        "MACHINEFEATURES": "https://mjf.example/mjf/machinefeatures",
        "JOBFEATURES": "/scratch/.mjf/x"}
    assert export_lines({"A": "1", "B": "2"}) == "export A=1\nexport B=2\n"
