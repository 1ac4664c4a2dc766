"""The side-by-side benchmark (issue 7): `python -m bench` / `make bench`; see bench/README.md."""
