//! The store conformance suite and the backends it runs against.
//!
//! `conformance` holds backend-agnostic checks written against `&dyn Store`; the few
//! that must look beneath the trait (count rows, measure them, corrupt one) also take a
//! `&dyn Backend`. Each backend module implements `Backend` and expands
//! `conformance_tests!` once, so every backend runs every check.

pub mod archive;
pub mod conformance;
pub mod cuttable;
pub mod fixtures;
pub mod jobs;
pub mod pools;
mod postgres;
mod sqlite;

use baton_core::ids::RunId;
use baton_store::Store;

/// Tables whose rows the suite counts.
#[derive(Debug, Clone, Copy)]
pub enum Table {
    Turns,
    /// Current versions of state records.
    Records,
    /// Per-turn deltas.
    RecordChanges,
    CallOutputs,
    Events,
}

/// A row to damage, to check that damage is reported and never skipped.
#[derive(Debug, Clone)]
pub enum Damage {
    RecordBody {
        run: RunId,
        kind: &'static str,
        ordinal: u32,
    },
    TurnRecord {
        run: RunId,
        turn: u32,
    },
    EventBody {
        run: RunId,
        seq: u64,
    },
    Header {
        run: RunId,
    },
}

/// Raw access to a backend's database beneath `Store`.
pub trait Backend {
    fn store(&self) -> &dyn Store;
    /// A new store on the same database, as another process would open it.
    fn reopen(&self) -> Box<dyn Store>;
    fn count(&self, table: Table, run: &RunId) -> i64;
    /// Bytes of payload one turn stored: its record, changes, outputs and events.
    fn turn_bytes(&self, run: &RunId, turn: u32) -> i64;
    /// Bytes of payload stored for the run's current records.
    fn record_bytes(&self, run: &RunId) -> i64;
    fn damage(&self, damage: &Damage);
    /// Makes `store()` read the database's clock `offset_ms` ahead of real time, so
    /// that leases (which expire by the database's clock) can be waited out without
    /// sleeping.
    fn set_clock_offset(&self, offset_ms: i64);
}

/// Expands to one `#[test]` per conformance check, each on a fresh backend from `$new`.
macro_rules! conformance_tests {
    ($new:expr) => {
        use $crate::suite::conformance as c;

        #[test]
        fn create_and_load_roundtrip() {
            c::create_and_load_roundtrip($new.store());
        }
        #[test]
        fn creating_a_run_twice_is_refused() {
            c::creating_a_run_twice_is_refused($new.store());
        }
        #[test]
        fn line_records_commit_and_load_with_their_turn() {
            c::line_records_commit_and_load_with_their_turn($new.store());
        }
        #[test]
        fn committed_turns_load_as_the_state_after_them() {
            c::committed_turns_load_as_the_state_after_them($new.store());
        }
        #[test]
        fn a_turn_is_never_committed_twice() {
            c::a_turn_is_never_committed_twice(&$new);
        }
        #[test]
        fn racing_commits_of_one_turn_commit_it_once() {
            c::racing_commits_of_one_turn_commit_it_once(&$new);
        }
        #[test]
        fn a_failing_commit_writes_nothing() {
            c::a_failing_commit_writes_nothing(&$new);
        }
        #[test]
        fn a_new_store_on_the_same_database_sees_identical_state() {
            c::a_new_store_on_the_same_database_sees_identical_state(&$new);
        }
        #[test]
        fn runs_resolve_by_exact_id_or_unique_prefix() {
            c::runs_resolve_by_exact_id_or_unique_prefix($new.store());
        }
        #[test]
        fn runs_list_newest_first_and_update_their_status() {
            c::runs_list_newest_first_and_update_their_status($new.store());
        }
        #[test]
        fn events_are_append_only_ordered_and_paginated() {
            c::events_are_append_only_ordered_and_paginated($new.store());
        }
        #[test]
        fn events_of_a_run_are_numbered_without_gaps() {
            c::events_of_a_run_are_numbered_without_gaps($new.store());
        }
        #[test]
        fn events_since_reads_every_run_from_a_cursor() {
            c::events_since_reads_every_run_from_a_cursor($new.store());
        }
        #[test]
        fn prior_outputs_are_the_earlier_turns_raw_outputs() {
            c::prior_outputs_are_the_earlier_turns_raw_outputs($new.store());
        }
        #[test]
        fn worker_holds_commit_with_their_turn_and_outlive_the_store() {
            c::worker_holds_commit_with_their_turn_and_outlive_the_store(&$new);
        }
        #[test]
        fn storage_grows_with_what_turns_changed() {
            c::storage_grows_with_what_turns_changed(&$new);
        }
        #[test]
        fn corrupt_rows_are_errors_with_context() {
            c::corrupt_rows_are_errors_with_context(&$new);
        }
        #[test]
        fn jobs_are_claimed_oldest_first_and_once() {
            $crate::suite::jobs::jobs_are_claimed_oldest_first_and_once($new.store());
        }
        #[test]
        fn an_expired_lease_is_reclaimed_and_the_old_token_is_fenced_off() {
            $crate::suite::jobs::an_expired_lease_is_reclaimed_and_the_old_token_is_fenced_off(
                &$new,
            );
        }
        #[test]
        fn queued_jobs_go_before_expired_leases_and_those_oldest_first() {
            $crate::suite::jobs::queued_jobs_go_before_expired_leases_and_those_oldest_first(
                &$new,
            );
        }
        #[test]
        fn leases_are_decided_by_the_database_clock_not_the_callers() {
            $crate::suite::jobs::leases_are_decided_by_the_database_clock_not_the_callers(&$new);
        }
        #[test]
        fn racing_claims_never_share_a_job() {
            $crate::suite::jobs::racing_claims_never_share_a_job(&$new);
        }
        #[test]
        fn a_run_is_advanced_by_one_lease_holder_at_a_time() {
            $crate::suite::jobs::a_run_is_advanced_by_one_lease_holder_at_a_time(&$new);
        }
        #[test]
        fn judging_a_group_marks_its_finished_candidates() {
            $crate::suite::jobs::judging_a_group_marks_its_finished_candidates($new.store());
        }
        #[test]
        fn a_failed_judgement_is_kept_and_the_group_can_be_judged_again() {
            $crate::suite::jobs::a_failed_judgement_is_kept_and_the_group_can_be_judged_again(
                $new.store(),
            );
        }
        #[test]
        fn job_runs_are_created_with_their_link_and_jobs_are_released_and_requeued() {
            $crate::suite::jobs::job_runs_are_created_with_their_link_and_jobs_are_released_and_requeued(
                $new.store(),
            );
        }
        #[test]
        fn pool_usage_sums_the_calls_of_its_workers_in_the_window() {
            $crate::suite::pools::pool_usage_sums_the_calls_of_its_workers_in_the_window(&$new);
        }
        #[test]
        fn a_refused_turn_counts_nothing_against_its_pool() {
            $crate::suite::pools::a_refused_turn_counts_nothing(&$new);
        }
        #[test]
        fn declared_usage_adds_and_a_set_replaces_what_came_before_it() {
            $crate::suite::pools::declared_usage_adds_and_a_set_replaces_what_came_before_it(
                $new.store(),
            );
        }
        #[test]
        fn a_spent_quota_marks_its_pool_exhausted_until_the_reset() {
            $crate::suite::pools::a_spent_quota_marks_its_pool_exhausted_until_the_reset(
                $new.store(),
            );
        }
        #[test]
        fn benches_record_who_and_when_and_unbench_puts_back() {
            $crate::suite::pools::benches_record_who_and_when_and_unbench_puts_back(&$new);
        }
        #[test]
        fn pins_are_written_with_their_turn_and_read_back_in_order() {
            $crate::suite::pools::pins_are_written_with_their_turn_and_read_back_in_order(&$new);
        }
        #[test]
        fn a_turn_that_does_not_commit_leaves_no_pin() {
            $crate::suite::pools::a_turn_that_does_not_commit_leaves_no_pin(&$new);
        }
        #[test]
        fn floor_reading_is_each_pools_usage_and_the_benches() {
            $crate::suite::pools::floor_reading_is_each_pools_usage_and_the_benches(
                $new.store(),
            );
        }
        #[test]
        fn a_floor_reading_sees_what_any_process_wrote_since_the_last() {
            $crate::suite::pools::a_floor_reading_sees_what_any_process_wrote_since_the_last(
                &$new,
            );
        }
        #[test]
        fn spend_outside_a_turn_counts_against_its_pool() {
            $crate::suite::pools::spend_outside_a_turn_counts_against_its_pool($new.store());
        }
        #[test]
        fn spend_of_a_committed_turn_is_not_counted_twice() {
            $crate::suite::pools::spend_of_a_committed_turn_is_not_counted_twice($new.store());
        }
        #[test]
        fn racing_reservations_for_the_last_of_a_pool_reserve_it_once() {
            $crate::suite::pools::racing_reservations_for_the_last_of_a_pool_reserve_it_once(
                &$new,
            );
        }
        #[test]
        fn a_released_or_expired_reservation_frees_the_headroom() {
            $crate::suite::pools::a_released_or_expired_reservation_frees_the_headroom(&$new);
        }
        #[test]
        fn a_committed_turns_reservation_is_gone_and_its_usage_counted_once() {
            $crate::suite::pools::a_committed_turns_reservation_is_gone_and_its_usage_counted_once(
                $new.store(),
            );
        }
        #[test]
        fn cancel_requests_stop_the_lease_they_name_and_no_other() {
            $crate::suite::jobs::cancel_requests_stop_the_lease_they_name_and_no_other(
                &$new,
            );
        }
    };
}
use conformance_tests;
