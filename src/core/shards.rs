//! Shards: which bindings make shard `n`, and where a new tenant goes (the
//! placement policy). A shard is one D1 ledger and one vector index; shard
//! 0 also holds the directory (docs/ARCHITECTURE.md, "Shards and the
//! directory").

/// A shard's number: 0 up to `SHARDS - 1`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub u16);

impl ShardId {
    /// The shard that holds the directory and, in a deployment of one
    /// shard, everything.
    pub const CONTROL: ShardId = ShardId(0);

    /// The shard `raw` names if the deployment has it (`count` shards).
    pub fn parse(raw: &str, count: u16) -> Option<ShardId> {
        let n: u16 = raw.parse().ok()?;
        // "007" or "+1" name no shard: one spelling per shard.
        (n < count && n.to_string() == raw).then_some(ShardId(n))
    }

    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Its D1 ledger's binding: `DB`, then `DB_SHARD_1`, ...
    pub fn ledger_binding(self) -> String {
        self.binding("DB")
    }

    /// Its Vectorize index's binding: `VECTORIZE`, `VECTORIZE_SHARD_1`, ...
    pub fn vectorize_binding(self) -> String {
        self.binding("VECTORIZE")
    }

    /// Its offline index's D1 binding: `VECTORS_DB`, `VECTORS_DB_SHARD_1`, ...
    pub fn local_index_binding(self) -> String {
        self.binding("VECTORS_DB")
    }

    fn binding(self, base: &str) -> String {
        if self == ShardId::CONTROL {
            base.to_string()
        } else {
            format!("{base}_SHARD_{}", self.0)
        }
    }
}

/// What placement knows of a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardLoad {
    pub shard: ShardId,
    /// Its D1 database's size in bytes; `None` when it could not be read
    /// (the shard then takes no new tenant).
    pub size_bytes: Option<u64>,
    /// Tenants the directory places on it.
    pub tenants: u64,
    /// Given to one tenant alone: takes no other.
    pub dedicated: bool,
}

/// Where an operator asks a new tenant to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementRequest {
    /// The policy picks: the least-full shard that takes new tenants.
    Auto,
    /// This shard; `dedicated`: as its only tenant, for good.
    Pinned { shard: ShardId, dedicated: bool },
}

/// Why a tenant cannot be placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementRefused {
    /// Every shard is dedicated, unreadable, or at `SHARD_FULL_BYTES`.
    NoShardAvailable,
    /// The pinned shard is dedicated to another tenant.
    ShardDedicated,
    /// A dedicated shard was asked for one that already holds tenants.
    ShardNotEmpty,
}

/// The shard a new tenant goes to. Auto: among the shards neither
/// dedicated nor unreadable nor at `full_bytes`, the smallest database,
/// then the fewest tenants, then the lowest number: a deterministic
/// choice from what the shards report.
pub fn place(
    request: PlacementRequest,
    loads: &[ShardLoad],
    full_bytes: u64,
) -> Result<ShardId, PlacementRefused> {
    match request {
        PlacementRequest::Auto => loads
            .iter()
            .filter(|l| !l.dedicated)
            .filter_map(|l| l.size_bytes.map(|size| (size, l.tenants, l.shard)))
            .filter(|(size, _, _)| *size < full_bytes)
            .min()
            .map(|(_, _, shard)| shard)
            .ok_or(PlacementRefused::NoShardAvailable),
        PlacementRequest::Pinned { shard, dedicated } => {
            let load = loads
                .iter()
                .find(|l| l.shard == shard)
                .ok_or(PlacementRefused::NoShardAvailable)?;
            if load.dedicated {
                Err(PlacementRefused::ShardDedicated)
            } else if dedicated && load.tenants > 0 {
                Err(PlacementRefused::ShardNotEmpty)
            } else {
                Ok(shard)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(n: u16, size: Option<u64>, tenants: u64, dedicated: bool) -> ShardLoad {
        ShardLoad {
            shard: ShardId(n),
            size_bytes: size,
            tenants,
            dedicated,
        }
    }

    #[test]
    fn bindings_keep_the_single_shard_names() {
        assert_eq!(ShardId(0).ledger_binding(), "DB");
        assert_eq!(ShardId(0).vectorize_binding(), "VECTORIZE");
        assert_eq!(ShardId(0).local_index_binding(), "VECTORS_DB");
        assert_eq!(ShardId(3).ledger_binding(), "DB_SHARD_3");
        assert_eq!(ShardId(3).vectorize_binding(), "VECTORIZE_SHARD_3");
        assert_eq!(ShardId(3).local_index_binding(), "VECTORS_DB_SHARD_3");
    }

    #[test]
    fn a_shard_is_named_one_way_and_only_if_it_exists() {
        assert_eq!(ShardId::parse("1", 2), Some(ShardId(1)));
        assert_eq!(ShardId::parse("2", 2), None);
        assert_eq!(ShardId::parse("01", 2), None);
        assert_eq!(ShardId::parse("+1", 2), None);
        assert_eq!(ShardId::parse("", 2), None);
        assert_eq!(ShardId::parse("-0", 2), None);
    }

    #[test]
    fn auto_picks_the_smallest_shard_that_takes_tenants() {
        let loads = [
            load(0, Some(900), 1, false),
            load(1, Some(100), 5, true),
            load(2, Some(300), 9, false),
            load(3, None, 0, false),
            load(4, Some(300), 2, false),
        ];
        assert_eq!(place(PlacementRequest::Auto, &loads, 1000), Ok(ShardId(4)));
        // At the full line a shard takes no one.
        assert_eq!(
            place(PlacementRequest::Auto, &loads, 300),
            Err(PlacementRefused::NoShardAvailable)
        );
    }

    #[test]
    fn a_pin_is_refused_on_a_dedicated_shard_and_a_dedication_on_a_shared_one() {
        let loads = [
            load(0, Some(9), 1, false),
            load(1, Some(9), 1, true),
            load(2, Some(9), 0, false),
        ];
        let pin = |n, dedicated| PlacementRequest::Pinned {
            shard: ShardId(n),
            dedicated,
        };
        assert_eq!(
            place(pin(1, false), &loads, 10),
            Err(PlacementRefused::ShardDedicated)
        );
        assert_eq!(
            place(pin(0, true), &loads, 10),
            Err(PlacementRefused::ShardNotEmpty)
        );
        assert_eq!(place(pin(2, true), &loads, 10), Ok(ShardId(2)));
        // A pin ignores the full line: the operator chose.
        assert_eq!(place(pin(0, false), &loads, 1), Ok(ShardId(0)));
        assert_eq!(
            place(pin(7, false), &loads, 10),
            Err(PlacementRefused::NoShardAvailable)
        );
    }
}
