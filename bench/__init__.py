"""The benchmarks and the soak (`make bench-*`, `make soak`): they drive the platform from
outside and may import anything of it; nothing imports them (the tests included: a
`lint-imports` contract). Their own harness is tested in bench/tests/."""
