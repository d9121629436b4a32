//! The built-in demonstration: five offline mock workers plan a Task Management REST
//! API (the scenario's claims live with the mock model in the gateway crate).

use baton_gateway::mock::demo;

use crate::config::{Roster, RunSettings, WorkerConfig};
use crate::orchestrator::RunSpec;

/// Package budget for the demo's whole plan: tight enough that later workers see the
/// compiler trim and omit, roomy enough that every worker gets the essentials.
pub const DEMO_TOTAL_BUDGET: usize = 6000;

pub fn roster() -> Roster {
    let worker = |id: &str, model: &str, family: &str, role: &str| WorkerConfig {
        family: family.into(),
        role: Some(role.into()),
        ..WorkerConfig::mock(id, model)
    };
    Roster {
        workers: vec![
            worker("analyst", "analyst-large", "alpha", "requirements"),
            worker("dba", "schema-pro", "beta", "database"),
            worker("security", "sec-mini", "gamma", "security"),
            worker("api", "api-writer", "alpha", "api design"),
            worker("reviewer", "critic", "beta", "review"),
        ],
    }
}

pub fn spec() -> RunSpec {
    RunSpec {
        objective: demo::OBJECTIVE.into(),
        tasks: demo::STEPS.iter().map(|s| s.to_string()).collect(),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: roster(),
        settings: RunSettings {
            total_budget: Some(DEMO_TOTAL_BUDGET),
            ..RunSettings::default()
        },
    }
}
