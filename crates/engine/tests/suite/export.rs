//! The Markdown export's turn table, written by the same row renderer as `baton
//! history`.

use super::*;

/// Regression: a task with a `|` (a shell pipeline, a table in the task itself) or a
/// line break split its turn's row into extra columns or rows, because the turn table
/// did not escape its cells as the model-call table does.
#[test]
fn a_task_with_a_pipe_or_a_line_break_keeps_its_turn_row_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let task = "count lines with `wc -l | sort`\nthen report";
    let (id, _) = run_all(&engine, &spec(&[task], Roster::mock(1)));
    let md = baton_engine::export::markdown(&*store, &id).unwrap();
    let table: Vec<&str> = md
        .split("## Turns\n\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.is_empty())
        .collect();
    let columns = |line: &str| line.replace("\\|", "").matches('|').count();
    let header = columns(table[0]);
    assert!(table.len() > 2, "{md}");
    for row in &table[2..] {
        assert!(
            row.starts_with("| "),
            "a row split over lines: {row:?}\n{md}"
        );
        assert_eq!(columns(row), header, "{row}");
    }
    assert!(table[2].contains("wc -l \\| sort"), "{}", table[2]);
}
