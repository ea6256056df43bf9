//! Index generations as the consumer and search read them.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{sql, Store};
use crate::ports::{Database, PortError, Stmt};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
struct IndexConfigRow {
    index_config: String,
}

/// A generation (`generations` table).
#[derive(Debug, Clone, Deserialize)]
pub struct GenerationRow {
    pub generation: u32,
    pub index_config: String,
    pub state: String,
}

impl<D: Database> Store<D> {
    /// The configuration generation 1 adopts when it has none (see
    /// `GENERATION_ADOPTABLE_CONFIG`); `None`: no live version records one.
    pub async fn adoptable_config(&self) -> Result<Option<String>, PortError> {
        let rows: Vec<IndexConfigRow> = self
            .db
            .query(Stmt::new(sql::GENERATION_ADOPTABLE_CONFIG, vec![]))
            .await?;
        Ok(rows.into_iter().next().map(|r| r.index_config))
    }

    /// The generations an index job writes (active, building, retained).
    pub async fn target_generations(&self) -> Result<Vec<GenerationRow>, PortError> {
        self.db
            .query(Stmt::new(sql::GENERATIONS_TARGET, vec![]))
            .await
    }

    /// The highest generation number (0 if none).
    pub async fn generation_max(&self) -> Result<u32, PortError> {
        let rows: Vec<serde_json::Value> = self
            .db
            .query(Stmt::new(sql::GENERATION_MAX, vec![]))
            .await?;
        Ok(rows
            .first()
            .and_then(|r| r["generation"].as_u64())
            .unwrap_or(0) as u32)
    }

    /// The generation search serves.
    pub async fn active_generation(&self) -> Result<Option<GenerationRow>, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::GENERATION_ACTIVE, vec![]))
            .await?
            .into_iter()
            .next())
    }
}
