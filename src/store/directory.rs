//! The directory (shard 0's ledger, migration 0032): which shard holds each
//! tenant, which token belongs to which tenant, and the dedicated shards.

use super::{int, sql, Store, TenantRow};
use crate::core::shards::ShardId;
use crate::ports::{Database, PortError, Stmt};
use serde::Deserialize;

/// A placed tenant.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct PlacementRow {
    pub tenant_id: String,
    pub shard: u16,
}

/// A token's tenant and that tenant's shard.
pub type TokenPlacementRow = PlacementRow;

/// A shard given to one tenant.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct DedicatedRow {
    pub shard: u16,
    pub tenant_id: String,
}

/// A new placement, as one batch writes it.
#[derive(Clone, Copy, Debug)]
pub struct NewPlacement<'a> {
    pub tenant_id: &'a str,
    pub shard: ShardId,
    pub dedicated: bool,
    pub tenants_max: u64,
    pub now: i64,
}

#[derive(Deserialize)]
struct ShardOnly {
    shard: u16,
}

#[derive(Deserialize)]
struct Count {
    n: u64,
}

impl<D: Database> Store<D> {
    /// The shard the directory places `tenant_id` on, if it does.
    pub async fn placement_of(&self, tenant_id: &str) -> Result<Option<ShardId>, PortError> {
        let row: Option<ShardOnly> = self
            .first(Stmt::new(sql::PLACEMENT_OF, vec![tenant_id.into()]))
            .await?;
        Ok(row.map(|r| ShardId(r.shard)))
    }

    /// Token `token_id`'s tenant and its shard, if the directory has it.
    pub async fn token_placement(
        &self,
        token_id: &str,
    ) -> Result<Option<TokenPlacementRow>, PortError> {
        self.first(Stmt::new(sql::TOKEN_PLACEMENT, vec![token_id.into()]))
            .await
    }

    /// Places a tenant in one batch: the directory's row, and for a
    /// dedicated shard its mark. `Ok(false)`: `tenants_max` are placed.
    /// A batch that would place the tenant twice, on a shard dedicated to
    /// another, or dedicate a shard another tenant holds, fails with
    /// `db_constraint` and writes nothing.
    pub async fn place_tenant(&self, p: &NewPlacement<'_>) -> Result<bool, PortError> {
        let shard = int(i64::from(p.shard.0));
        let mut stmts = vec![
            Stmt::new(
                sql::PLACEMENT_REFUSE_DEDICATED,
                vec![p.tenant_id.into(), shard.clone()],
            ),
            Stmt::new(
                sql::PLACEMENT_INSERT,
                vec![
                    p.tenant_id.into(),
                    shard.clone(),
                    int(p.now),
                    int(p.tenants_max as i64),
                ],
            ),
        ];
        if p.dedicated {
            stmts.push(Stmt::new(
                sql::PLACEMENT_REFUSE_SHARED,
                vec![p.tenant_id.into(), shard.clone()],
            ));
            stmts.push(Stmt::new(
                sql::SHARD_DEDICATE,
                vec![p.tenant_id.into(), shard, int(p.now)],
            ));
        }
        let changed = self.db.batch(stmts).await?;
        Ok(changed.get(1) == Some(&1))
    }

    /// How many tenants the directory places on `shard`.
    pub async fn shard_tenants(&self, shard: ShardId) -> Result<u64, PortError> {
        let row: Option<Count> = self
            .first(Stmt::new(sql::SHARD_TENANTS, vec![int(i64::from(shard.0))]))
            .await?;
        Ok(row.map_or(0, |c| c.n))
    }

    /// The dedicated shards, by number.
    pub async fn dedicated_shards(&self) -> Result<Vec<DedicatedRow>, PortError> {
        self.db
            .query(Stmt::new(sql::SHARDS_DEDICATED, Vec::new()))
            .await
    }

    /// Placed tenants after `cursor` in ID order, at most `limit`.
    pub async fn placements_page(
        &self,
        cursor: &str,
        limit: usize,
    ) -> Result<Vec<PlacementRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::PLACEMENTS_PAGE,
                vec![cursor.into(), int(limit as i64)],
            ))
            .await
    }

    /// Records that `token_id` belongs to `tenant_id`.
    pub async fn register_token(&self, token_id: &str, tenant_id: &str) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::TOKEN_DIRECTORY_INSERT,
                vec![token_id.into(), tenant_id.into()],
            ))
            .await
            .map(drop)
    }

    /// Forgets `token_id` (revoked): no request finds a shard for it.
    pub async fn forget_token(&self, token_id: &str, tenant_id: &str) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::TOKEN_DIRECTORY_DELETE,
                vec![token_id.into(), tenant_id.into()],
            ))
            .await
            .map(drop)
    }

    /// The tenants named (those this ledger holds), in ID order.
    pub async fn tenants_by_ids(&self, ids: &[String]) -> Result<Vec<TenantRow>, PortError> {
        let mut rows: Vec<TenantRow> = self
            .db
            .query(Stmt::new(
                sql::TENANTS_BY_IDS,
                vec![super::json_array(ids).into()],
            ))
            .await?;
        rows.sort_by(|a, b| a.tenant_id.cmp(&b.tenant_id));
        Ok(rows)
    }

    /// The database's size in bytes, as it reports it.
    pub async fn size_bytes(&self) -> Result<u64, PortError> {
        self.db
            .size_after(Stmt::new(sql::SIZE_PROBE, Vec::new()))
            .await
    }
}
