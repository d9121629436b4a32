use baton_core::fidelity::{FidelityCase, run};
use baton_core::tokens::BpeEstimator;
fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let case = FidelityCase {
        turns: a[0] as u32,
        steps: a[1],
        budget: a[2],
        volume: a[3],
    };
    let t = std::time::Instant::now();
    let r = run(&case, &BpeEstimator);
    for (c, t) in &r.tallies {
        println!(
            "{:30} {:.4} {}/{}",
            c.label(),
            t.fraction(),
            t.delivered,
            t.relevant
        );
    }
    println!(
        "mean tokens {} over {} items {} in {:?}",
        r.mean_tokens,
        r.over_budget,
        r.final_items,
        t.elapsed()
    );
}
