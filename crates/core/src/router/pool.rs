//! Pools: one subscription's worth of models, its allowance per window, what was used,
//! and the owner's benches.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{RouterError, Window};
use crate::ids::{Timestamp, WorkerId};

/// A pool (`claude`, `codex`, `glm`, `local` …).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct PoolId(pub String);

impl PoolId {
    pub fn new(id: impl Into<String>) -> Self {
        PoolId(id.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a pool may spend per window. Every dimension is optional; a pool with none is
/// unmetered (a local model) and always reads as 0 % used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Allowance {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
}

/// One dimension of an allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    Tokens,
    Usd,
    Requests,
}

impl Dimension {
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Tokens => "tokens",
            Dimension::Usd => "usd",
            Dimension::Requests => "requests",
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Allowance {
    /// Refuses a dimension that leaves nothing to spend (0, or a negative or non-finite
    /// dollar amount): such a pool could never be picked, which is surely not what was
    /// meant, and the error says how to write what probably was.
    pub fn validate(&self, pool: &PoolId) -> Result<(), RouterError> {
        let zero = |dimension| RouterError::ZeroAllowance {
            pool: pool.clone(),
            dimension,
        };
        if self.tokens == Some(0) {
            return Err(zero(Dimension::Tokens));
        }
        if let Some(usd) = self.usd
            && !(usd.is_finite() && usd > 0.0)
        {
            return Err(zero(Dimension::Usd));
        }
        if self.requests == Some(0) {
            return Err(zero(Dimension::Requests));
        }
        Ok(())
    }

    /// The fraction of each allowed dimension that `usage` has spent, in the fixed order
    /// tokens, usd, requests. Dimensions without an allowance are not listed.
    pub fn fractions(&self, usage: &PoolUsage) -> impl Iterator<Item = (Dimension, f64)> {
        let tokens = self
            .tokens
            .map(|limit| (Dimension::Tokens, usage.tokens as f64 / limit as f64));
        let usd = self.usd.map(|limit| (Dimension::Usd, usage.usd / limit));
        let requests = self
            .requests
            .map(|limit| (Dimension::Requests, usage.requests as f64 / limit as f64));
        [tokens, usd, requests].into_iter().flatten()
    }

    /// The pool's used fraction: the largest over its dimensions (0 when unmetered). A
    /// pool is as spent as its most spent dimension.
    pub fn used_fraction(&self, usage: &PoolUsage) -> f64 {
        self.fractions(usage)
            .map(|(_, fraction)| fraction)
            .fold(0.0, f64::max)
    }

    /// The first dimension whose allowance is used up (fraction ≥ 1), if any.
    pub fn spent_dimension(&self, usage: &PoolUsage) -> Option<Dimension> {
        self.fractions(usage)
            .find(|(_, fraction)| *fraction >= 1.0)
            .map(|(dimension, _)| dimension)
    }
}

/// A pool as configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    pub id: PoolId,
    #[serde(default)]
    pub allowance: Allowance,
    #[serde(default)]
    pub window: Window,
}

impl Pool {
    pub fn validate(&self) -> Result<(), RouterError> {
        if self.id.0.trim().is_empty() {
            return Err(RouterError::EmptyName { what: "pool" });
        }
        self.allowance.validate(&self.id)
    }
}

/// What a pool used in the current window: the sums of provider-reported usage on every
/// call baton made with its workers, plus usage the user set by hand; and, when a
/// provider said the quota is gone, until when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolUsage {
    pub pool: PoolId,
    #[serde(default)]
    pub tokens: u64,
    /// US dollars.
    #[serde(default)]
    pub usd: f64,
    #[serde(default)]
    pub requests: u64,
    /// A provider answered that the quota is exhausted and named this reset. Before it
    /// the pool is off the floor whatever the sums say; from it on, the mark is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhausted_until: Option<Timestamp>,
}

impl PoolUsage {
    /// Nothing used yet.
    pub fn none(pool: PoolId) -> Self {
        PoolUsage {
            pool,
            tokens: 0,
            usd: 0.0,
            requests: 0,
            exhausted_until: None,
        }
    }

    /// The exhaustion mark that still holds at `now`.
    pub fn exhausted_at(&self, now: Timestamp) -> Option<Timestamp> {
        self.exhausted_until.filter(|until| *until > now)
    }
}

/// What the owner took off the floor: whole pools and single workers. Nothing is
/// renamed; the next seatings come from what is left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Benches {
    pub pools: BTreeSet<PoolId>,
    pub workers: BTreeSet<WorkerId>,
}

/// Every pool's used fraction at one moment, as a pin records it.
pub type Fractions = BTreeMap<PoolId, f64>;
