//! Non-negative, asymmetric, category-balanced least squares on relative error.
//!
//! Minimises Σ_d w_d · a_d · (x_d·β / y_d − 1)² with β_j ≥ 0 except for the inputs marked
//! signed (interaction corrections), where w_d balances categories (each
//! category weighs the same in total) and a_d = `under_weight` when document d is under-estimated
//! (iteratively re-weighted), so the fit leans towards over-estimating: an under-estimate costs a
//! rejected request, an over-estimate only an early compaction. Documents within a band around
//! their exact count (ratio in [`Objective::band`]) weigh `band_weight` times that: they already
//! meet the ±10% target, so the fit spends its freedom on the documents that miss it.
//!
//! Rows of a guard category are constraints rather than samples: they weigh nothing while their
//! ratio is at least the category's floor, and max(`under_weight`, [`GUARD_WEIGHT`])·(r − floor)²
//! below it.

/// Guard categories (training only, never evaluated) and the ratio their rows are held at or
/// above: placeholder text (lorem ipsum: no vocabulary has its words, claude-legacy least of
/// all, so its floor is lower), one-letter words, the scripts with too few catalogs on the
/// machine to be a category (Odia, Amharic, Lao, Thaana: see `corpus::COSTLY_SCRIPTS`; each has
/// its own script count, so holding them high costs no other script), chat lines with emoji,
/// words in full-width forms, English `th` words (and made-up ones of `th` syllables),
/// tables of figures in box-drawing frames (only a few such documents on the machine, yet
/// the fit's price for box characters and digits among them depends on them alone), and words in
/// scripts no vocabulary knows well, lines of symbols, emoji sequences, Vietnamese catalogs and
/// four-byte letters (the `rare_script`, `symbols`, `four`, `latin_ext_additional` and
/// `rare_four` counts, which no category on the machine has enough of), and Chinese with CJK
/// Extension A ideographs among its words (the `rare_script` count in the `script` kind).
pub const GUARDS: [(&str, f64); 14] = [
    ("guard-lorem", 0.75),
    ("guard-letters", 0.85),
    ("guard-scripts", 0.95),
    ("guard-emoji", 0.90),
    ("guard-fullwidth", 0.85),
    ("guard-th", 0.85),
    ("guard-th-made-up", 0.75),
    ("guard-table", 0.90),
    ("guard-rare-scripts", 0.90),
    ("guard-symbols", 0.90),
    ("guard-emoji-sequences", 0.85),
    ("guard-vietnamese", 0.90),
    ("guard-rare-four", 0.90),
    ("guard-han-extension-a", 0.90),
];

/// The least weight of a guard row below its floor: a guard is a constraint, and a family fitted
/// with a small under-estimate weight (a light lean towards over-estimates) must not hold it
/// more loosely for that.
pub const GUARD_WEIGHT: f64 = 20.0;

/// The floor of a guard category, `None` for the others.
pub fn guard_floor(category: &str) -> Option<f64> {
    GUARDS.iter().find(|(c, _)| *c == category).map(|&(_, f)| f)
}

/// The objective's weights (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Objective {
    /// Weight of an under-estimated document relative to an over-estimated one.
    pub under_weight: f64,
    /// Ratios (estimate / exact) within which a document weighs `band_weight` times as much.
    pub band: (f64, f64),
    /// The weight of the documents within the band (1: no band).
    pub band_weight: f64,
}

impl Objective {
    /// The weight of a document with ratio `ratio` (not a guard), relative to its category's.
    fn weight(&self, ratio: f64) -> f64 {
        let lean = if ratio < 1.0 { self.under_weight } else { 1.0 };
        if (self.band.0..=self.band.1).contains(&ratio) {
            lean * self.band_weight
        } else {
            lean
        }
    }
}

/// One training row: features and the exact count.
pub struct Row<'a> {
    pub features: &'a [f64],
    pub exact: f64,
    pub category: &'a str,
}

#[allow(clippy::needless_range_loop)] // index arithmetic reads clearer here
/// Solves `a x = b` by Gaussian elimination with partial pivoting; `None` if singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            if f == 0.0 {
                continue;
            }
            for k in col..n {
                a[row][k] -= f * a[col][k];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

/// Weighted least squares restricted to the `active` features, with a small ridge.
fn weighted_fit(rows: &[Row<'_>], weights: &[f64], targets: &[f64], active: &[bool]) -> Vec<f64> {
    let dim = active.len();
    let idx: Vec<usize> = (0..dim).filter(|&j| active[j]).collect();
    let n = idx.len();
    let mut a = vec![vec![0.0; n]; n];
    let mut b = vec![0.0; n];
    for ((row, &w), &t) in rows.iter().zip(weights).zip(targets) {
        if row.exact <= 0.0 || w == 0.0 {
            continue;
        }
        let x: Vec<f64> = idx.iter().map(|&j| row.features[j] / row.exact).collect();
        for i in 0..n {
            b[i] += w * t * x[i];
            for k in 0..n {
                a[i][k] += w * x[i] * x[k];
            }
        }
    }
    let trace: f64 = (0..n).map(|i| a[i][i]).sum::<f64>().max(1e-12);
    for (i, row) in a.iter_mut().enumerate() {
        row[i] += 1e-6 * trace / n.max(1) as f64;
    }
    let mut beta = vec![0.0; dim];
    if let Some(x) = solve(a, b) {
        for (k, &j) in idx.iter().enumerate() {
            beta[j] = x[k];
        }
    }
    beta
}

/// How the fit treats one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Its coefficient is at least zero (a price).
    NonNegative,
    /// Its coefficient takes either sign (a correction).
    Signed,
    /// Not fitted: its coefficient stays zero, and it is left out of the ridge's spread, so that
    /// the fit is the one without it. For a count no training text has, priced after the fit
    /// (the combining marks: `marks.rs`).
    Unfitted,
}

/// Fits β_j ≥ 0 for every [`Input::NonNegative`] input (active set: drop the most negative
/// coefficient and refit).
fn nonneg_fit(rows: &[Row<'_>], weights: &[f64], targets: &[f64], inputs: &[Input]) -> Vec<f64> {
    let dim = inputs.len();
    let mut active: Vec<bool> = inputs.iter().map(|&i| i != Input::Unfitted).collect();
    loop {
        let beta = weighted_fit(rows, weights, targets, &active);
        let worst = (0..dim)
            .filter(|&j| active[j] && inputs[j] == Input::NonNegative && beta[j] < 0.0)
            .min_by(|&i, &j| beta[i].total_cmp(&beta[j]));
        match worst {
            Some(j) => active[j] = false,
            None => return beta,
        }
    }
}

pub fn predict(beta: &[f64], features: &[f64]) -> f64 {
    beta.iter()
        .zip(features)
        .map(|(b, f)| b * f)
        .sum::<f64>()
        .max(0.0)
}

/// The full fit: category balancing, IRLS towards over-estimates; guard rows held at or above
/// their floor ([`GUARDS`]).
pub fn fit(rows: &[Row<'_>], inputs: &[Input], objective: Objective, rounds: usize) -> Vec<f64> {
    let mut per_category = std::collections::HashMap::<&str, f64>::new();
    for row in rows {
        *per_category.entry(row.category).or_default() += 1.0;
    }
    let base: Vec<f64> = rows
        .iter()
        .map(|r| 1.0 / per_category[r.category])
        .collect();
    let floors: Vec<Option<f64>> = rows.iter().map(|r| guard_floor(r.category)).collect();
    let mut weights: Vec<f64> = base
        .iter()
        .zip(&floors)
        .map(|(&w, floor)| if floor.is_some() { 0.0 } else { w })
        .collect();
    let mut targets = vec![1.0; rows.len()];
    let mut beta = nonneg_fit(rows, &weights, &targets, inputs);
    for _ in 0..rounds {
        for (i, row) in rows.iter().enumerate() {
            let ratio = predict(&beta, row.features) / row.exact;
            (weights[i], targets[i]) = if let Some(floor) = floors[i] {
                if ratio < floor {
                    (base[i] * objective.under_weight.max(GUARD_WEIGHT), floor)
                } else {
                    (0.0, floor)
                }
            } else {
                (base[i] * objective.weight(ratio), 1.0)
            };
        }
        beta = nonneg_fit(rows, &weights, &targets, inputs);
    }
    beta
}

/// One training row of a second step (`marks.rs`, `symbols.rs`, `phonetic.rs`): the estimate
/// without the priced term, the term's count, and what the family is fitted to.
pub struct PriceRow {
    pub base: f64,
    pub count: f64,
    pub target: f64,
}

/// The price per counted character (a mark, a symbol, a phonetic letter) of a second step:
/// least squares on relative error with under-estimates weighing `under_weight` times as much
/// (iteratively re-weighted, as the main fit), not below zero; then raised, as the main fit's
/// safety scale is, until at most `floor_quantile` of the rows are below `floor_ratio`.
pub fn price_per_count(
    rows: &[PriceRow],
    under_weight: f64,
    rounds: usize,
    floor_ratio: f64,
    floor_quantile: f64,
) -> f64 {
    let rows: Vec<&PriceRow> = rows
        .iter()
        .filter(|r| r.count > 0.0 && r.target > 0.0)
        .collect();
    if rows.is_empty() {
        return 0.0;
    }
    let mut price = 0.0;
    for _ in 0..=rounds {
        let (mut numerator, mut denominator) = (0.0, 0.0);
        for row in &rows {
            let ratio = (row.base + price * row.count) / row.target;
            let weight = if ratio < 1.0 { under_weight } else { 1.0 };
            let scale = row.target * row.target;
            numerator += weight * (row.target - row.base) * row.count / scale;
            denominator += weight * row.count * row.count / scale;
        }
        price = (numerator / denominator).max(0.0);
    }
    // The price each row needs to reach the floor, highest first; the rows the quantile allows
    // below it are skipped.
    let mut needed: Vec<f64> = rows
        .iter()
        .map(|r| (floor_ratio * r.target - r.base) / r.count)
        .collect();
    needed.sort_by(|a, b| b.total_cmp(a));
    let allowed_below = (floor_quantile * rows.len() as f64).floor() as usize;
    needed
        .get(allowed_below)
        .map_or(price, |&floor_price| price.max(floor_price))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Least squares: no lean towards over-estimates, no band.
    const PLAIN: Objective = Objective {
        under_weight: 1.0,
        band: (1.0, 1.0),
        band_weight: 1.0,
    };

    #[test]
    fn recovers_a_linear_model() {
        let xs: Vec<[f64; 2]> = (1..50)
            .map(|i| [i as f64, (i * i % 17) as f64 + 1.0])
            .collect();
        let rows: Vec<Row<'_>> = xs
            .iter()
            .map(|x| Row {
                features: x,
                exact: 0.5 * x[0] + 2.0 * x[1],
                category: "a",
            })
            .collect();
        let beta = fit(&rows, &[Input::NonNegative; 2], PLAIN, 0);
        assert!(
            (beta[0] - 0.5).abs() < 1e-3 && (beta[1] - 2.0).abs() < 1e-3,
            "{beta:?}"
        );
    }

    #[test]
    fn weighs_documents_by_side_and_band() {
        let objective = Objective {
            under_weight: 4.0,
            band: (0.97, 1.05),
            band_weight: 0.5,
        };
        assert_eq!(objective.weight(0.90), 4.0);
        assert_eq!(objective.weight(0.98), 2.0);
        assert_eq!(objective.weight(1.00), 0.5);
        assert_eq!(objective.weight(1.05), 0.5);
        assert_eq!(objective.weight(1.20), 1.0);
    }

    #[test]
    fn a_band_lets_the_misses_pull_harder() {
        // One price for two kinds of document: 9 cost 1.0 a unit, one costs 1.3. Without a band
        // the fit sits near the mean; with the nine inside a band weighing little, it moves
        // towards the outlier (the nine stay within their band).
        let xs = [[1.0]; 10];
        let rows: Vec<Row<'_>> = xs
            .iter()
            .enumerate()
            .map(|(i, x)| Row {
                features: x,
                exact: if i == 0 { 1.3 } else { 1.0 },
                category: "a",
            })
            .collect();
        let banded = Objective {
            band: (0.9, 1.1),
            band_weight: 0.2,
            ..PLAIN
        };
        let without = fit(&rows, &[Input::NonNegative], PLAIN, 5)[0];
        let with = fit(&rows, &[Input::NonNegative], banded, 5)[0];
        assert!(with > without + 0.01, "{with} vs {without}");
        assert!(with < 1.1, "{with}");
    }

    #[test]
    fn the_price_per_count_fits_the_counts_cost() {
        // Each row costs 2 tokens a mark beyond its base: the price is 2, under any weight.
        let rows: Vec<PriceRow> = (1..20)
            .map(|i| PriceRow {
                base: 100.0 * i as f64,
                count: 10.0 * i as f64,
                target: 120.0 * i as f64,
            })
            .collect();
        for weight in [1.0, 3.0, 8.0] {
            assert!((price_per_count(&rows, weight, 8, 0.85, 0.005) - 2.0).abs() < 1e-9);
        }
        // A row far below its floor at that price raises it to what the row needs.
        let mut low = rows;
        low.push(PriceRow {
            base: 10.0,
            count: 10.0,
            target: 100.0,
        });
        let p = price_per_count(&low, 3.0, 8, 0.85, 0.005);
        assert!((p - 7.5).abs() < 1e-9, "{p}");
        // No marks: no price.
        assert_eq!(price_per_count(&[], 3.0, 8, 0.85, 0.005), 0.0);
    }
}
