//! Criterion benchmarks of the ferroloop core live in `benches/`; this library is empty.
