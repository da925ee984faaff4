"""forge_array benchmarks: ``python -m bench.run --help``; see bench/README.md."""
