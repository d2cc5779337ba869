//! The directory's keys, timeouts and Lua scripts (the layout is in the
//! module's docs).

use std::sync::LazyLock;

use redis::Script;

pub(super) fn rec(session: &str) -> String {
    format!("dx:{{{session}}}:rec")
}

pub(super) fn applied_key(session: &str) -> String {
    format!("dx:{{{session}}}:applied")
}

pub(super) fn released_key(session: &str) -> String {
    format!("dx:{{{session}}}:released")
}

pub(super) fn node_key(node: &str) -> String {
    format!("dx:node:{node}")
}

pub(super) fn owned_key(node: &str) -> String {
    format!("dx:owned:{node}")
}

/// The set of registered nodes.
pub(super) const NODES: &str = "dx:nodes";

/// How long a connection attempt to Redis may take.
pub(super) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);
/// How long one command may wait for its answer.
pub(super) const RESPONSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// Reconnection attempts after a broken connection, and the longest pause
/// between them.
pub(super) const RETRIES: usize = 2;
pub(super) const RETRY_DELAY_MAX: std::time::Duration = std::time::Duration::from_millis(500);

/// The shared part of the scripts below: every script's arguments end
/// with the image, its version and three counted lists (applied, bound,
/// released), the lists from ARGV index `at`; `lists` applies them to the log and the release counts (KEYS[2],
/// KEYS[3]) and returns the release counts.
pub(super) const LISTS: &str = r"
local function lists(at)
  local n = tonumber(ARGV[at])
  for i = at + 1, at + n do redis.call('RPUSH', KEYS[2], ARGV[i]) end
  at = at + n + 1
  n = tonumber(ARGV[at])
  for i = at + 1, at + n do redis.call('HSETNX', KEYS[3], ARGV[i], 0) end
  at = at + n + 1
  n = tonumber(ARGV[at])
  local out = {1}
  for i = at + 1, at + n do out[#out + 1] = redis.call('HINCRBY', KEYS[3], ARGV[i], 1) end
  return out
end
";

pub(super) fn script(body: &str) -> Script {
    Script::new(&format!("{LISTS}{body}"))
}

/// Creates the record if there is none: `{1}`, else `{0}`.
pub(super) static CREATE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'inc', ARGV[2], 'image', ARGV[3], 'ver', ARGV[4])
return lists(5)
",
    )
});

/// Saves if the record is still ARGV[1]'s at incarnation ARGV[2]: `{1,
/// count per released request}`, or `{0}`. The image is written only if
/// its version is newer; the lists always apply (they are facts).
pub(super) static SAVE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc', 'ver')
if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then return {0} end
if tonumber(ARGV[4]) > tonumber(owner[3] or '0') then
  redis.call('HSET', KEYS[1], 'image', ARGV[3], 'ver', ARGV[4])
end
return lists(5)
",
    )
});

/// Takes the record over as incarnation ARGV[2] if it is at incarnation
/// ARGV[3] with image version ARGV[4]: `{1, counts}` (the requests the
/// previous engine held, released), else `{0, found}` (`found` -1 if there
/// is no record).
pub(super) static TAKE_OVER: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local at = redis.call('HMGET', KEYS[1], 'inc', 'ver')
if not at[1] then return {0, -1} end
if at[1] ~= ARGV[3] or at[2] ~= ARGV[4] then return {0, tonumber(at[1])} end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'inc', ARGV[2], 'image', ARGV[5], 'ver', ARGV[6])
return lists(7)
",
    )
});

/// Deletes the record if it is still ARGV[1]'s at incarnation ARGV[2],
/// applying the lists (the requests the close released): `{1, counts}`
/// or `{0}`.
pub(super) static CLOSE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc')
if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then return {0} end
redis.call('DEL', KEYS[1])
return lists(5)
",
    )
});

pub(super) fn counts(out: &[i64]) -> Option<Vec<u64>> {
    match out.split_first() {
        Some((1, counts)) => Some(
            counts
                .iter()
                .map(|&n| u64::try_from(n).unwrap_or(0))
                .collect(),
        ),
        _ => None,
    }
}
