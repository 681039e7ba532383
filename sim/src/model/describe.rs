//! Compact one-line descriptions of protocol messages and chunk operations in 3FS nouns, shared
//! by every model's counterexample printer.

use t3fs_core::chunk::ChunkOp;
use t3fs_core::mgmtd::chain_update::render;
use t3fs_core::msg::Msg;

pub fn describe_op(op: &ChunkOp) -> String {
    match op {
        ChunkOp::Update {
            chunk,
            version,
            kind,
            ..
        } => format!("update {chunk} pending {version} {}", describe_kind(kind)),
        ChunkOp::Commit {
            chunk,
            version,
            chain_version,
        } => format!("commit {chunk} {version} at chain {chain_version}"),
        ChunkOp::Read {
            chunk, uncommitted, ..
        } => format!(
            "read {chunk}{}",
            if *uncommitted { " (uncommitted)" } else { "" }
        ),
        ChunkOp::List => "list".into(),
        ChunkOp::Install {
            chunk,
            version,
            chain_version,
            data,
        } => match data {
            Some(d) => format!("install {chunk} {version} at chain {chain_version} data={d:?}"),
            None => format!("install-remove {chunk} at chain {chain_version}"),
        },
    }
}

pub fn describe_kind(kind: &t3fs_core::chunk::UpdateKind) -> String {
    match kind {
        t3fs_core::chunk::UpdateKind::Write { offset, data } => format!("write@{offset}={data:?}"),
        other => format!("{other:?}"),
    }
}

/// A compact description of a protocol message.
pub fn describe_msg(msg: &Msg) -> String {
    match msg {
        Msg::Write(r) | Msg::Update(r) => format!(
            "{} {} {} {} u={} tag={}/{}{} retry={}",
            if matches!(msg, Msg::Write(_)) {
                "Write"
            } else {
                "Update"
            },
            r.chain,
            r.chunk,
            describe_kind(&r.kind),
            r.update_version,
            r.tag.channel,
            r.tag.seqnum,
            if r.is_syncing { " syncing" } else { "" },
            r.retry
        ),
        Msg::UpdateReply(r) => format!(
            "UpdateReply {} {} u={} {:?}{}",
            r.chain,
            r.chunk,
            r.update_version,
            r.status,
            r.result
                .map(|x| format!(" committed {}", x.commit_version))
                .unwrap_or_default()
        ),
        Msg::Read(r) => format!("Read {} {} retry={}", r.chain, r.chunk, r.retry),
        Msg::ReadReply(r) => format!(
            "ReadReply {} {:?} data={:?} {}",
            r.chunk, r.status, r.data, r.version
        ),
        Msg::Routing(r) => {
            let chains: Vec<String> = r
                .chains
                .values()
                .map(|c| format!("{} {}", c.versioned(), render(&c.targets)))
                .collect();
            format!("Routing {} {}", r.version, chains.join(" "))
        }
        Msg::GetRouting { known } => format!("GetRouting known={known}"),
        Msg::Heartbeat(h) => {
            let ts: Vec<String> = h
                .targets
                .iter()
                .map(|t| format!("{}:{:?}", t.target, t.state))
                .collect();
            format!("Heartbeat hb={} [{}]", h.hb_version, ts.join(" "))
        }
        Msg::HeartbeatReply(r) => format!("HeartbeatReply {:?}", r.status),
        Msg::NotPrimary { primary } => format!("NotPrimary primary={primary:?}"),
        Msg::ExtendSession(s) => format!("ExtendSession {}", s.client),
        Msg::SyncStart(r) => match r.after {
            None => format!("SyncStart {} {}", r.req.chain, r.req.target),
            Some(c) => format!("SyncStart {} {} after {c}", r.req.chain, r.req.target),
        },
        Msg::SyncStartReply(r) => format!(
            "SyncStartReply {} {} {:?} {} chunks{}{}",
            r.req.chain,
            r.req.target,
            r.status,
            r.metas.len(),
            r.after.map_or(String::new(), |c| format!(" after {c}")),
            if r.more { " (more)" } else { "" }
        ),
        Msg::SyncDone(r) => format!("SyncDone {} {}", r.chain, r.target),
        Msg::SyncDoneReply(r) => format!("SyncDoneReply {} {:?}", r.req.chain, r.status),
        Msg::MetaReq(r) => format!("MetaReq {}#{} {:?}", r.client.0, r.request.0, r.op),
        Msg::MetaReply(r) => format!("MetaReply #{} {:?}", r.request.0, r.result),
        Msg::GetClientSessions => "GetClientSessions".into(),
        Msg::SpaceInfo => "SpaceInfo".into(),
        Msg::SpaceInfoReply(r) => format!("SpaceInfoReply {:?}", r.targets),
        Msg::KvReq(r) => format!("KvReq {} {:?}", r.id, r.op),
        Msg::KvReply(r) => format!("KvReply {} {:?}", r.id, r.result),
        Msg::NodeAddrs(a) => format!("NodeAddrs {:?}", a.addrs),
        Msg::DumpChunkMeta { cursor } => format!("DumpChunkMeta {cursor:?}"),
        Msg::ChunkMetaDump(d) => format!(
            "ChunkMetaDump {} {} targets next {:?}",
            d.node,
            d.targets.len(),
            d.next
        ),
        Msg::QueryLastChunk(q) => format!(
            "QueryLastChunk {} inode {} [{}, {})",
            q.chain, q.inode.0, q.begin, q.end
        ),
        Msg::QueryLastChunkReply(r) => {
            format!(
                "QueryLastChunkReply #{} {:?} {:?}",
                r.query_id.0, r.status, r.last
            )
        }
        Msg::ClientSessions(s) => format!(
            "ClientSessions {} clients complete={}",
            s.clients.len(),
            s.complete
        ),
    }
}
