//! The client history of a run, simulated or real: every invocation and response, stamped with a
//! strictly increasing logical time (so real-time order is total) and with nanoseconds since
//! the run began (simulated time, or one wall clock shared by every client of a real run), for
//! latency figures. Shared so that real runs feed the simulator's checkers the same record.
//!
//! Invariant: an operation returns at most once; a failed or abandoned operation stays open
//! (`ret == None`), meaning "may or may not have taken effect". Real clients record under one
//! lock, so logical order matches the order of the wall clock. Not here: checking.

use crate::workload::Payload;

/// What an operation did.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum OpKind {
    /// Wrote a value.
    Write(u64),
    /// Read; `None` until it returns.
    Read(Option<Payload>),
}

/// One operation.
#[derive(Clone, Debug)]
pub struct OpRec {
    /// Client index.
    pub client: u32,
    /// Workload chunk index.
    pub chunk: u32,
    /// Logical invocation time.
    pub invoke: u64,
    /// Logical response time (`None`: open).
    pub ret: Option<u64>,
    /// The operation.
    pub kind: OpKind,
    /// The call failed (its outcome is unknown).
    pub failed: bool,
    /// Simulated ns at invocation.
    pub invoke_ns: u64,
    /// Simulated ns at response.
    pub ret_ns: Option<u64>,
    /// Reads: the replica that answered and the chain version the client asked under.
    pub served: Option<t3fs_core::client::Served>,
}

/// A run's history.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Operations in invocation order.
    pub ops: Vec<OpRec>,
    clock: u64,
    /// Simulated time now (set by the world before recording).
    pub now_ns: u64,
    /// Operations that returned, kept as they return: the simulator samples the count every
    /// simulated second, and counting over the whole history each time grew with the run.
    returned: usize,
}

impl History {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Records an invocation; returns its index.
    pub fn invoke(&mut self, client: u32, chunk: u32, kind: OpKind) -> usize {
        let invoke = self.tick();
        self.ops.push(OpRec {
            client,
            chunk,
            invoke,
            ret: None,
            kind,
            failed: false,
            invoke_ns: self.now_ns,
            ret_ns: None,
            served: None,
        });
        self.ops.len() - 1
    }

    /// Records a response (`read` is the decoded payload for reads).
    pub fn ret(&mut self, index: usize, read: Option<Payload>) {
        let t = self.tick();
        let now = self.now_ns;
        let op = &mut self.ops[index];
        assert!(op.ret.is_none() && !op.failed, "an operation returns once");
        op.ret = Some(t);
        op.ret_ns = Some(now);
        self.returned += 1;
        if let OpKind::Read(r) = &mut op.kind {
            *r = read;
        }
    }

    /// Records which replica served read `index` (before its response is recorded).
    pub fn served(&mut self, index: usize, served: Option<t3fs_core::client::Served>) {
        self.ops[index].served = served;
    }

    /// Records a failure: the operation stays open.
    pub fn fail(&mut self, index: usize) {
        self.ops[index].failed = true;
    }

    /// Operations completed successfully.
    pub fn completed(&self) -> usize {
        self.returned
    }
}
