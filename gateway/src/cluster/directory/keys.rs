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

pub(super) fn relby_key(session: &str) -> String {
    format!("dx:{{{session}}}:relby")
}

pub(super) fn closed_key(session: &str) -> String {
    format!("dx:{{{session}}}:closed")
}

pub(super) fn moved_channel(node: &str) -> String {
    format!("dx:moved:{node}")
}

pub(super) fn node_key(node: &str) -> String {
    format!("dx:node:{node}")
}

pub(super) fn owned_key(node: &str) -> String {
    format!("dx:owned:{node}")
}

/// The set of registered nodes.
pub(super) const NODES: &str = "dx:nodes";

/// The store's generation: a random value the first node sets; a store
/// that lost its data has none (or, once a node has set a new one, another).
pub(super) const GENERATION: &str = "dx:gen";

/// How long a closed session's tombstone stays, in seconds: a record
/// missing while its tombstone exists was closed (by its owner); missing
/// without one, the store lost it. Far longer than any lease's grace, after
/// which no node still holds a copy of a session another node closed.
pub const TOMBSTONE_TTL_S: u64 = 3600;

/// How long a connection attempt to Redis may take.
pub(super) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);
/// How long one command may wait for its answer.
pub(super) const RESPONSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// A Redis Cluster connection's attempts at a command whose connection
/// broke (a server or Sentinel connection reconnects at its next command).
pub(super) const RETRIES: usize = 2;

/// The shared part of the scripts below. Their keys are the session's
/// record, applied log, release counts, releasers and tombstone
/// (`KEYS[1..5]`); their arguments start with the node and incarnation
/// acting, and end with the image, its version, the applied log's length
/// the caller knows is stored (`base`, -1 if it does not know) and three
/// counted lists (applied, bound, released), from ARGV index `at`.
///
/// - `missing()` tells a record that was closed (its tombstone stands) from
///   one the store lost: `{0}` or `{-1}`.
/// - `behind(at)`: the log is shorter than `base` (the store lost writes):
///   `{-2, length}`, or nil.
/// - `lists(at)` applies the lists idempotently (a save sent again after an
///   unanswered one adds nothing twice): applied entries the log already
///   holds past `base` are skipped, bound requests are set once, and a
///   request's release is counted once per releaser (`node:incarnation`,
///   noted in `KEYS[4]`). Returns `{1, count per released request}`.
pub(super) const LISTS: &str = r"
local function missing()
  if redis.call('EXISTS', KEYS[5]) == 1 then return {0} end
  return {-1}
end
-- The record is another's, or at an older incarnation than the caller's:
-- then the store lost the caller's takeover (a failover to a replica that
-- missed it), and answers as for a lost record so the caller writes back.
local function fenced(owner)
  if tonumber(owner[2]) < tonumber(ARGV[2]) then return {-1} end
  if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then return {0} end
  return nil
end
local function behind(at)
  local base = tonumber(ARGV[at])
  local have = redis.call('LLEN', KEYS[2])
  if base >= 0 and have < base then return {-2, have} end
  return nil
end
local function lists(at)
  local tag = ARGV[1] .. ':' .. ARGV[2]
  local base = tonumber(ARGV[at])
  local skip = 0
  if base >= 0 then skip = math.max(redis.call('LLEN', KEYS[2]) - base, 0) end
  at = at + 1
  local n = tonumber(ARGV[at])
  for i = at + 1 + skip, at + n do redis.call('RPUSH', KEYS[2], ARGV[i]) end
  at = at + n + 1
  n = tonumber(ARGV[at])
  for i = at + 1, at + n do redis.call('HSETNX', KEYS[3], ARGV[i], 0) end
  at = at + n + 1
  n = tonumber(ARGV[at])
  local out = {1}
  for i = at + 1, at + n do
    local r = ARGV[i]
    if redis.call('HSETNX', KEYS[4], r .. '|' .. tag, 1) == 1 then
      out[#out + 1] = redis.call('HINCRBY', KEYS[3], r, 1)
    else
      out[#out + 1] = tonumber(redis.call('HGET', KEYS[3], r) or '1')
    end
  end
  return out
end
";

pub(super) fn script(body: &str) -> Script {
    Script::new(&format!("{LISTS}{body}"))
}

/// Creates the record if there is none: `{1, length of the applied log}`
/// (an earlier session of the id may have left one), else `{0}`.
pub(super) static CREATE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'inc', ARGV[2], 'image', ARGV[3], 'ver', ARGV[4])
redis.call('DEL', KEYS[5])
lists(5)
return {1, redis.call('LLEN', KEYS[2])}
",
    )
});

/// Saves if the record is still ARGV[1]'s at incarnation ARGV[2]: `{1,
/// count per released request}`; `{0}` (another owner, or closed), `{-1}`
/// (the store lost the record, or holds it at an older incarnation: it
/// lost this node's takeover) or `{-2, log length}` (the store lost
/// writes). The image is written only if its version is newer; the lists
/// always apply (they are facts).
pub(super) static SAVE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc', 'ver')
if not owner[1] then return missing() end
local other = fenced(owner)
if other then return other end
local short = behind(5)
if short then return short end
if tonumber(ARGV[4]) > tonumber(owner[3] or '0') then
  redis.call('HSET', KEYS[1], 'image', ARGV[3], 'ver', ARGV[4])
end
return lists(5)
",
    )
});

/// Takes the record over as incarnation ARGV[2] if it is at incarnation
/// ARGV[3] with image version ARGV[4]: `{{1, counts}, log, release
/// counts}` (the counts of the requests the previous engine held,
/// released; then the whole applied log and every request's release
/// count, as `HGETALL` lists them, read in the same script so that the
/// new owner holds them once it hears of the takeover), else `{{0,
/// found}, {}, {}}` (`found` -1 if there is no record). The previous
/// owner, if another node, is told on its channel (`dx:moved:<node>`:
/// `<record key> <new incarnation>`).
pub(super) static TAKE_OVER: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local at = redis.call('HMGET', KEYS[1], 'inc', 'ver', 'node')
if not at[1] then return {{0, -1}, {}, {}} end
if at[1] ~= ARGV[3] or at[2] ~= ARGV[4] then return {{0, tonumber(at[1])}, {}, {}} end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'inc', ARGV[2], 'image', ARGV[5], 'ver', ARGV[6])
if at[3] ~= ARGV[1] then redis.call('PUBLISH', 'dx:moved:' .. at[3], KEYS[1] .. ' ' .. ARGV[2]) end
local counts = lists(7)
return {counts, redis.call('LRANGE', KEYS[2], 0, -1), redis.call('HGETALL', KEYS[3])}
",
    )
});

/// Writes a session back after the store lost it (or part of it), as the
/// node ARGV[1] holding it at incarnation ARGV[2] knows it: record (image
/// ARGV[3], version ARGV[4]; an empty image writes a closed session back:
/// its tombstone, and no record: a record of this node's at this
/// incarnation, or of an older one, is a stale copy the store fell back to
/// (a failover to a replica that missed the close) and is deleted), the
/// whole applied log (ARGV[5] entries),
/// which the stored log is a prefix of (only its missing tail is
/// appended; a save that landed first already added its entries), and an
/// image older than the stored one of the same holder is not written (a
/// save of a later image landed first),
/// then ARGV[n] requests as (id, release count, released by this holder:
/// 1 or 0) triples, then the tombstone's TTL. Refused (0) if the record is
/// another's at this or a later incarnation, or was closed by another
/// holder or with an image; else 1. The holder that closed the session
/// (its tombstone names `node:incarnation`) writes it back closed even
/// so: its close may have landed on a store that had lost the writes just
/// before it (a failover to a replica that missed a release), and the
/// log's tail and the release counts are restored under the tombstone.
pub(super) static WRITE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local at = redis.call('HMGET', KEYS[1], 'node', 'inc', 'ver')
if at[1] then
  local inc = tonumber(at[2])
  if inc > tonumber(ARGV[2]) or (inc == tonumber(ARGV[2]) and at[1] ~= ARGV[1]) then return 0 end
elseif redis.call('EXISTS', KEYS[5]) == 1 then
  if ARGV[3] ~= '' or redis.call('GET', KEYS[5]) ~= ARGV[1] .. ':' .. ARGV[2] then return 0 end
end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[5], ARGV[1] .. ':' .. ARGV[2], 'EX', ARGV[#ARGV])
elseif not at[1] or at[1] ~= ARGV[1] or at[2] ~= ARGV[2]
    or tonumber(at[3] or '0') < tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'node', ARGV[1], 'inc', ARGV[2], 'image', ARGV[3], 'ver', ARGV[4])
end
local n = tonumber(ARGV[5])
local have = redis.call('LLEN', KEYS[2])
for i = 6 + have, 5 + n do redis.call('RPUSH', KEYS[2], ARGV[i]) end
local j = 6 + n
local tag = ARGV[1] .. ':' .. ARGV[2]
for i = j + 1, j + 3 * tonumber(ARGV[j]), 3 do
  local count = tonumber(ARGV[i + 1])
  if tonumber(redis.call('HGET', KEYS[3], ARGV[i]) or '-1') < count then
    redis.call('HSET', KEYS[3], ARGV[i], count)
  end
  if ARGV[i + 2] == '1' then redis.call('HSETNX', KEYS[4], ARGV[i] .. '|' .. tag, 1) end
end
return 1
",
    )
});

/// Deletes the record if it is still ARGV[1]'s at incarnation ARGV[2],
/// applying the lists (the requests the close released) and leaving a
/// tombstone: `{1, counts}`, or as [`SAVE`] answers.
pub(super) static CLOSE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc')
if not owner[1] then return missing() end
local other = fenced(owner)
if other then return other end
local short = behind(5)
if short then return short end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[5], ARGV[1] .. ':' .. ARGV[2], 'EX', ARGV[#ARGV])
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
