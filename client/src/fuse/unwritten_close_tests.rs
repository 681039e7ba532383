//! Closes of sessions that wrote nothing (unwritten_closes.rs), over the in-memory client:
//! they wait for each other and go to meta as one request, a handle that was written closes
//! at once with its length, and the unmount sends what is still queued.

use super::test_mount::{mount, ROOT};
use super::unwritten_closes::DELAY;

#[test]
fn releases_of_unwritten_handles_close_together_in_one_request() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let mut handles = Vec::new();
        for name in ["a", "b", "c"] {
            handles.push(m.created(ROOT, name).await.0);
        }
        let before = m.client().requests();
        for fh in handles {
            assert_eq!(m.release(fh).await, Ok(()));
        }
        assert_eq!(s.unwritten.queued(), 3, "queued, not sent");
        assert_eq!(m.client().open_sessions(), 3);
        // The queue goes when the first close's wait ends (a timer of this runtime, which
        // fires before a longer one started after it).
        tokio::time::sleep(DELAY * 4).await;
        assert_eq!(s.unwritten.queued(), 0);
        assert_eq!(m.client().open_sessions(), 0, "every session closed");
        assert_eq!(m.client().requests() - before, 1, "in one request");
    });
}

#[test]
fn a_written_handle_closes_at_once_with_its_length() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let (w, attr) = m.created(ROOT, "w").await;
        let (idle, _) = m.created(ROOT, "idle").await;
        assert_eq!(m.write(w, 0, b"abc").await, Ok(3));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(m.release(idle).await, Ok(()));
        assert_eq!(s.unwritten.queued(), 1, "only the unwritten handle waits");
        assert_eq!(m.client().open_sessions(), 1);
        let st = s.stat(attr.ino).await.unwrap();
        assert_eq!(
            st.size, 3,
            "the written handle's close told meta its length"
        );
        // What the unmount does: the queue goes now, whatever its timer.
        s.send_unwritten().await;
        assert_eq!((s.unwritten.queued(), m.client().open_sessions()), (0, 0));
    });
}
