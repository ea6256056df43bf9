//! Index generations: what the consumer and search read, the operators'
//! list, retiring one, and the switch.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{sql, Store};
use crate::ports::{Database, PortError, Stmt};
use serde::Deserialize;

use crate::core::state::GenerationState;

#[derive(Debug, Clone, Deserialize)]
struct IndexConfigRow {
    index_config: String,
}

/// A generation (`generations` table).
#[derive(Debug, Clone, Deserialize)]
pub struct GenerationRow {
    pub generation: u32,
    pub index_config: String,
    pub state: GenerationState,
}

#[derive(Deserialize)]
struct GenerationNumberRow {
    generation: u32,
}

/// A generation as the operators' list shows it: its row and how many
/// chunk rows D1 holds for it.
#[derive(Debug, Clone, Deserialize)]
pub struct GenerationListRow {
    pub generation: u32,
    pub index_config: String,
    pub state: GenerationState,
    /// Its count (migration 0024).
    #[serde(rename = "chunk_rows")]
    pub chunks: u64,
    pub created_at: i64,
    pub updated_at: i64,
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
        let rows: Vec<GenerationNumberRow> = self
            .db
            .query(Stmt::new(sql::GENERATION_MAX, vec![]))
            .await?;
        Ok(rows.first().map_or(0, |r| r.generation))
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

    /// Every generation with its counts, oldest first: what an operator lists.
    pub async fn generations_list(&self) -> Result<Vec<GenerationListRow>, PortError> {
        self.db
            .query(Stmt::new(sql::GENERATIONS_LIST, vec![]))
            .await
    }

    /// Retires a retained or abandoned generation; whether it changed.
    pub async fn generation_retire(&self, generation: u32, now: i64) -> Result<bool, PortError> {
        let changed = self
            .db
            .execute(Stmt::new(
                sql::GENERATION_RETIRE,
                vec![generation.into(), crate::ports::SqlValue::Int(now)],
            ))
            .await?;
        Ok(changed > 0)
    }

    /// The switch: `generation` active, the active one retained (and an
    /// older retained one retiring), in one batch whose statements each
    /// re-check `switch_allowed`; with `backfill`, that backfill completes
    /// in the same batch, if its pass `passes` found nothing missing (none:
    /// a rollback to a retained generation). Returns whether it switched.
    pub async fn generation_switch(
        &self,
        generation: u32,
        backfill: Option<(&str, u32)>,
        now: i64,
    ) -> Result<bool, PortError> {
        use crate::ports::SqlValue;
        let now = SqlValue::Int(now);
        let p = || vec![SqlValue::from(generation), now.clone()];
        let checked = || {
            let mut v = p();
            v.push(backfill.map(|(id, _)| id).into());
            v.push(backfill.map(|(_, pass)| pass).into());
            v
        };
        let mut stmts = vec![
            Stmt::new(sql::GENERATION_SWITCH_RETIRE_OLDER, checked()),
            Stmt::new(sql::GENERATION_SWITCH_RETAIN, checked()),
            Stmt::new(sql::GENERATION_SWITCH_ACTIVATE, p()),
        ];
        if let Some((id, _)) = backfill {
            stmts.push(Stmt::new(
                sql::BACKFILL_COMPLETE,
                vec![id.into(), now.clone()],
            ));
        }
        let changes = self.db.batch(stmts).await?;
        Ok(changes.get(2).copied().unwrap_or(0) > 0)
    }
}
