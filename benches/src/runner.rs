//! Runs workloads for every implementation in interleaved rounds (A B C A B C …, so machine drift
//! affects all alike) and reduces the samples to medians, ranges and ratios.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::alloc::allocations;
use crate::memory::{peak_rss_bytes, reset_peak_rss, rss_bytes};

/// How a workload's speed is expressed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// Bytes processed per run: reported as MB/s (10^6 bytes per second).
    Bytes(u64),
    /// Operations per run: reported as µs per operation.
    Ops(u64),
    /// A whole run: reported as milliseconds per run.
    Run,
}

/// One implementation of a workload: a closure that does the whole job once and returns a
/// checksum (events seen, say), which must agree across the workload's checked implementations.
pub struct Case {
    /// The implementation's name (`ferroloop`, a peer's crate name, a floor).
    pub implementation: String,
    /// Does the work once; returns the checksum.
    pub run: Box<dyn FnMut() -> u64>,
    /// Untimed preparation before each timed run (building the input the run consumes).
    pub setup: Option<Box<dyn FnMut()>>,
    /// Whether the checksum is compared with the others' (floors doing a different job are not).
    pub checked: bool,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("implementation", &self.implementation)
            .finish()
    }
}

impl Case {
    /// A case from a name and a closure.
    pub fn new(implementation: impl Into<String>, run: impl FnMut() -> u64 + 'static) -> Self {
        Self {
            implementation: implementation.into(),
            run: Box::new(run),
            setup: None,
            checked: true,
        }
    }

    /// A case whose input is built by `setup` outside the measurement before every run, then
    /// consumed by `run` (like criterion's `iter_batched`).
    pub fn batched<T: 'static>(
        implementation: impl Into<String>,
        setup: impl FnMut() -> T + 'static,
        mut run: impl FnMut(T) -> u64 + 'static,
    ) -> Self {
        let setup = Rc::new(RefCell::new(setup));
        let slot: Rc<RefCell<Option<T>>> = Rc::new(RefCell::new(None));
        let (fill, take) = (slot.clone(), slot);
        let make = setup.clone();
        Self {
            implementation: implementation.into(),
            run: Box::new(move || {
                // Without a prepared input (a direct call), the run builds its own.
                let input = take.borrow_mut().take();
                let input = input.unwrap_or_else(|| (make.borrow_mut())());
                run(input)
            }),
            setup: Some(Box::new(move || {
                let input = (setup.borrow_mut())();
                *fill.borrow_mut() = Some(input);
            })),
            checked: true,
        }
    }

    /// Marks the case as a floor or reference doing a different job: its checksum is not
    /// compared with the others'.
    pub fn unchecked(mut self) -> Self {
        self.checked = false;
        self
    }

    /// Runs the case once; returns the time the run took (setup excluded) and its checksum.
    fn timed(&mut self) -> (Duration, u64) {
        if let Some(setup) = &mut self.setup {
            setup();
        }
        let start = Instant::now();
        let checksum = std::hint::black_box((self.run)());
        (start.elapsed(), checksum)
    }
}

/// A workload and its implementations; the first case is ferroloop's, the reference for ratios.
#[derive(Debug)]
pub struct Workload {
    /// Its name in tables, e.g. `sse/anthropic-6MB/1460B`.
    pub name: String,
    /// How speed is expressed.
    pub unit: Unit,
    /// Events (or calls) per run, for the allocations-per-event column; 0 to omit it.
    pub events: u64,
    /// The implementations, ferroloop's first.
    pub cases: Vec<Case>,
    /// Whether checksums must agree across the checked cases.
    pub same_checksum: bool,
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Interleaved rounds; each gives one sample per implementation.
    pub rounds: usize,
    /// A sample repeats the job until it has run at least this long.
    pub min_sample_time: Duration,
}

impl RunOptions {
    /// The default (thorough) options, or fewer and shorter samples for `--quick`.
    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                rounds: 3,
                min_sample_time: Duration::from_millis(5),
            }
        } else {
            Self {
                rounds: 11,
                min_sample_time: Duration::from_millis(40),
            }
        }
    }
}

/// One line of the result table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Workload name.
    pub workload: String,
    /// Implementation name.
    pub implementation: String,
    /// Unit of `median`, `min`, `max`: `MB/s`, `µs/op` or `ms/run`.
    pub unit: &'static str,
    /// Median over samples.
    pub median: f64,
    /// Slowest sample, in the same unit (lowest MB/s, highest µs).
    pub min: f64,
    /// Fastest sample.
    pub max: f64,
    /// How many times ferroloop's speed this implementation's is: above 1 means ferroloop is
    /// faster (ferroloop's own row is 1).
    pub ferroloop_speedup: f64,
    /// Allocation calls per event in one run, when counted.
    pub allocs_per_event: Option<f64>,
    /// Peak RSS of the process during one run, in bytes, when measured (includes every input
    /// generated before the run).
    pub peak_rss: Option<u64>,
    /// How far the peak rose above the RSS at the run's start: the memory the run itself
    /// touched (a lower bound: pages the allocator kept from earlier runs are reused unseen).
    pub rss_growth: Option<u64>,
    /// The checksum of the run.
    pub checksum: u64,
    /// Samples taken.
    pub samples: usize,
}

/// Runs every workload and returns its rows; `progress(done, total, label)` is called before each
/// step so a caller can draw a progress bar.
pub fn run(
    workloads: &mut [Workload],
    options: &RunOptions,
    mut progress: impl FnMut(usize, usize, &str),
) -> Result<Vec<Row>, String> {
    let total: usize = workloads
        .iter()
        .map(|w| w.cases.len() * (options.rounds + 1))
        .sum();
    let mut done = 0;
    let mut rows = Vec::new();
    for workload in workloads.iter_mut() {
        // A first, untimed run per case: checksum, allocations and peak memory; it also warms up.
        let mut checksums = Vec::new();
        let mut allocs = Vec::new();
        let mut peaks = Vec::new();
        let mut growths = Vec::new();
        for case in &mut workload.cases {
            progress(
                done,
                total,
                &format!("{} · {}", workload.name, case.implementation),
            );
            done += 1;
            if let Some(setup) = &mut case.setup {
                setup();
            }
            let memory = reset_peak_rss();
            let start_rss = rss_bytes();
            let before = allocations();
            let checksum = (case.run)();
            let allocated = allocations() - before;
            checksums.push(checksum);
            allocs.push((allocated > 0 || before > 0).then_some(allocated));
            let peak = if memory { peak_rss_bytes() } else { None };
            peaks.push(peak);
            growths.push(peak.zip(start_rss).map(|(p, s)| p.saturating_sub(s)));
        }
        let checked: Vec<u64> = workload
            .cases
            .iter()
            .zip(&checksums)
            .filter(|(case, _)| case.checked)
            .map(|(_, c)| *c)
            .collect();
        if workload.same_checksum && checked.iter().any(|c| *c != checked[0]) {
            return Err(format!(
                "{}: implementations disagree: {:?}",
                workload.name,
                workload
                    .cases
                    .iter()
                    .map(|c| &c.implementation)
                    .zip(&checksums)
                    .collect::<Vec<_>>()
            ));
        }
        // Calibrate repetitions so a sample lasts at least `min_sample_time`.
        let mut reps = Vec::new();
        for case in &mut workload.cases {
            let once = case.timed().0.max(Duration::from_nanos(100));
            reps.push(
                (options.min_sample_time.as_nanos() / once.as_nanos()).clamp(1, 100_000) as u32,
            );
        }
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); workload.cases.len()];
        for round in 0..options.rounds {
            for (i, case) in workload.cases.iter_mut().enumerate() {
                progress(
                    done,
                    total,
                    &format!(
                        "{} · {} ({}/{})",
                        workload.name,
                        case.implementation,
                        round + 1,
                        options.rounds
                    ),
                );
                done += 1;
                let seconds = if case.setup.is_some() {
                    let total: Duration = (0..reps[i]).map(|_| case.timed().0).sum();
                    total.as_secs_f64() / f64::from(reps[i])
                } else {
                    let start = Instant::now();
                    for _ in 0..reps[i] {
                        std::hint::black_box((case.run)());
                    }
                    start.elapsed().as_secs_f64() / f64::from(reps[i])
                };
                samples[i].push(seconds);
            }
        }
        let medians: Vec<f64> = samples.iter().map(|s| median(s)).collect();
        for (i, case) in workload.cases.iter().enumerate() {
            let (unit, value) = express(workload.unit, medians[i]);
            let fastest = samples[i].iter().copied().fold(f64::INFINITY, f64::min);
            let slowest = samples[i].iter().copied().fold(0.0, f64::max);
            let (_, best) = express(workload.unit, fastest);
            let (_, worst) = express(workload.unit, slowest);
            rows.push(Row {
                workload: workload.name.clone(),
                implementation: case.implementation.clone(),
                unit,
                median: value,
                min: worst,
                max: best,
                ferroloop_speedup: medians[i] / medians[0],
                allocs_per_event: match (allocs[i], workload.events) {
                    (Some(n), events) if events > 0 => Some(n as f64 / events as f64),
                    _ => None,
                },
                peak_rss: peaks[i],
                rss_growth: growths[i],
                checksum: checksums[i],
                samples: samples[i].len(),
            });
        }
    }
    progress(total, total, "done");
    Ok(rows)
}

/// Converts seconds per run into the workload's unit.
fn express(unit: Unit, seconds: f64) -> (&'static str, f64) {
    match unit {
        Unit::Bytes(bytes) => ("MB/s", bytes as f64 / seconds / 1e6),
        Unit::Ops(ops) => ("µs/op", seconds * 1e6 / ops.max(1) as f64),
        Unit::Run => ("ms/run", seconds * 1e3),
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Renders rows as an aligned text table.
pub fn table(rows: &[Row]) -> String {
    let header = [
        "workload",
        "implementation",
        "median",
        "min–max",
        "ferroloop ×",
        "allocs/event",
        "peak RSS (+run)",
    ];
    let mut lines: Vec<[String; 7]> = vec![header.map(String::from)];
    for row in rows {
        lines.push([
            row.workload.clone(),
            row.implementation.clone(),
            format!("{} {}", fmt_num(row.median), row.unit),
            format!("{}–{}", fmt_num(row.min), fmt_num(row.max)),
            format!("{:.2}", row.ferroloop_speedup),
            row.allocs_per_event
                .map_or("-".into(), |a| format!("{a:.2}")),
            match (row.peak_rss, row.rss_growth) {
                (Some(peak), Some(growth)) => format!(
                    "{:.1} MiB (+{:.1})",
                    peak as f64 / 1048576.0,
                    growth as f64 / 1048576.0
                ),
                (Some(peak), None) => format!("{:.1} MiB", peak as f64 / 1048576.0),
                _ => "-".into(),
            },
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                let pad = w - cell.chars().count();
                if c < 2 {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if n == 0 {
            out.push_str(
                &widths
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join("  "),
            );
            out.push('\n');
        }
    }
    out
}

fn fmt_num(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn runs_interleaved_and_reports_ratios() {
        let mut workloads = vec![Workload {
            name: "toy".into(),
            unit: Unit::Bytes(1000),
            events: 10,
            same_checksum: true,
            cases: vec![
                Case::new("fast", || {
                    std::hint::black_box((0..1000u64).sum::<u64>());
                    7
                }),
                Case::new("slow", || {
                    std::hint::black_box((0..100_000u64).map(std::hint::black_box).sum::<u64>());
                    7
                }),
            ],
        }];
        let options = RunOptions {
            rounds: 3,
            min_sample_time: Duration::from_millis(1),
        };
        let mut steps = 0;
        let rows = run(&mut workloads, &options, |_, _, _| steps += 1).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].ferroloop_speedup, 1.0);
        assert!(
            rows[1].ferroloop_speedup > 1.0,
            "ferroloop (first) is faster: {rows:?}"
        );
        assert_eq!(rows[1].samples, 3);
        assert!(steps >= 8);
        let text = table(&rows);
        assert!(text.contains("MB/s") && text.contains("slow"));
    }

    #[test]
    fn batched_setup_is_untimed_and_unchecked_cases_may_differ() {
        use std::cell::Cell;
        let setups = Rc::new(Cell::new(0usize));
        let counted = setups.clone();
        let mut workloads = vec![Workload {
            name: "batched".into(),
            unit: Unit::Ops(100),
            events: 0,
            same_checksum: true,
            cases: vec![
                Case::batched(
                    "consumer",
                    move || {
                        counted.set(counted.get() + 1);
                        // Slow setup: were it timed, this case would look slower than the floor.
                        std::thread::sleep(Duration::from_millis(2));
                        vec![1u64; 100]
                    },
                    |input| input.iter().sum(),
                ),
                Case::new("floor", || 42).unchecked(),
            ],
        }];
        let options = RunOptions {
            rounds: 3,
            min_sample_time: Duration::from_millis(1),
        };
        let rows = run(&mut workloads, &options, |_, _, _| {}).unwrap();
        assert_eq!(rows[0].checksum, 100);
        assert_eq!(rows[1].checksum, 42);
        // Setup ran before every run: the first, the calibration, and each round's repetitions.
        assert!(setups.get() >= 5, "{}", setups.get());
        // 2 ms of setup per run would be 20 µs per op if it were timed.
        assert!(rows[0].median < 20.0, "{rows:?}");
    }

    #[test]
    fn disagreeing_checksums_are_an_error() {
        let mut workloads = vec![Workload {
            name: "bad".into(),
            unit: Unit::Run,
            events: 0,
            same_checksum: true,
            cases: vec![Case::new("a", || 1), Case::new("b", || 2)],
        }];
        let options = RunOptions {
            rounds: 1,
            min_sample_time: Duration::from_millis(1),
        };
        assert!(run(&mut workloads, &options, |_, _, _| {}).is_err());
    }
}
