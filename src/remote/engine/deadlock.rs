//! The job-wide deadlock check, the engine's side: locale 0 runs waves of
//! `DeadlockProbe`s (beside termination's waves, with their own wave
//! numbers), every locale answers from inside a poll with its state and
//! counters (`sched/deadlock_wave.rs`), and once two waves agree on a deadlock,
//! locale 0 asks every locale for its waiters. `sched/sleep/README.md`,
//! "Deadlock detection across locales", states the protocol; the wire
//! format is in `remote/README.md`.

use super::Engine;
use crate::comm::transport::Network;
use crate::remote::wire::{self, Control, Header};
use crate::sched::Registry;
use crate::sched::deadlock_wave::{Answer, LocaleState, judge};
use crate::sched::driver::{DriverContext, poll_with};
use crate::sched::outside_wait::StuckSample;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long locale 0 waits for the other locales' waiters (each takes up
/// to half a second to ask its own idle workers).
const WAITERS_TIMEOUT: Duration = Duration::from_millis(1500);

/// Most bytes of one locale's waiters list: the list is short already
/// (`deadlock::waiter_lines`); this bounds a list of long lines.
const WAITERS_BYTES: usize = 16 * 1024;

/// Attempts at taking the poll token for locale 0's own answer before the
/// wave counts locale 0 as busy.
const TOKEN_TRIES: u32 = 1000;

impl Engine {
    /// Program messages sent and received (termination's counters).
    fn message_counts(&self) -> (u64, u64) {
        (self.sent(), self.received.load(Ordering::Relaxed))
    }

    /// This locale's answer, from inside a poll.
    fn answer_in(&self, cx: &DriverContext<'_>) -> Answer {
        cx.locale_answer(|| self.message_counts(), self.outbox_len() > 0)
    }

    /// A locale other than 0, inside a poll: answers deadlock wave `wave`.
    pub(super) fn answer_deadlock_probe(&self, src: usize, wave: u64, cx: &DriverContext<'_>) {
        let answer = self.answer_in(cx);
        self.send_from_poll(
            src,
            Network::Reply,
            Header::control(Control::DeadlockReply, wave),
            &wire::words(&answer.words()),
        );
    }

    /// Locale 0: an answer to deadlock wave `wave` (answers to an older
    /// wave are dropped).
    pub(super) fn take_deadlock_answer(&self, src: usize, wave: u64, payload: &[u8]) {
        let answer = wire::read_words(payload, 4)
            .map_err(|e| e.to_string())
            .and_then(|w| {
                Answer::from_words([w[0], w[1], w[2], w[3]])
                    .ok_or_else(|| format!("unknown locale state {}", w[0]))
            });
        match answer {
            Ok(a) => {
                let mut c = self.control.lock().unwrap();
                if wave == c.deadlock_wave {
                    c.deadlock_answers.push(a);
                    self.control_changed.notify_all();
                }
            }
            Err(e) => eprintln!("cantus: locale {src} sent a malformed deadlock answer: {e}"),
        }
    }

    /// Locale 0, from a blocked outside thread: one deadlock wave. `None`
    /// if some locale is busy or did not answer within the grace period,
    /// or a message is in flight; else the totals that the next wave must
    /// repeat (`deadlock_wave::judge`).
    pub(super) fn deadlock_wave(&self) -> StuckSample {
        if self.here != 0 {
            return None;
        }
        let reg = self.registry.get().and_then(Weak::upgrade)?;
        let patience = reg.config.deadlock?;
        let _one_wave_at_a_time = self.deadlock_waves.lock().unwrap();
        // Busy here: no wave (it would find no deadlock), no traffic.
        if self.own_answer(&reg)?.state == LocaleState::Busy {
            return None;
        }
        let wave = {
            let mut c = self.control.lock().unwrap();
            c.deadlock_wave += 1;
            c.deadlock_answers.clear();
            c.deadlock_wave
        };
        if !self
            .tell_others(Network::Reply, Control::DeadlockProbe, wave)
            .is_empty()
        {
            return None;
        }
        let mine = self.own_answer(&reg)?;
        let others = self.locales - 1;
        let mut c = self.wait_control(Some(Instant::now() + patience), |c| {
            c.deadlock_answers.len() >= others
        });
        if c.deadlock_answers.len() < others {
            return None;
        }
        let mut answers = std::mem::take(&mut c.deadlock_answers);
        answers.push(mine);
        judge(&answers)
    }

    /// Locale 0's own answer, under the poll token so that no poll
    /// delivers a frame while it reads (`None`: the token stayed busy).
    fn own_answer(&self, reg: &Registry) -> Option<Answer> {
        for _ in 0..TOKEN_TRIES {
            let mut answer = None;
            poll_with(reg, |cx| {
                answer = Some(self.answer_in(cx));
                0
            });
            if answer.is_some() {
                return answer;
            }
            std::thread::yield_now();
        }
        None
    }

    /// A locale other than 0, inside a poll: sends locale 0 its waiters
    /// for the deadlock report. Listing them asks the idle workers and
    /// waits for their answers, which a poll must not do: a thread of its
    /// own does it (the job is about to end).
    pub(super) fn send_waiters(&self, src: usize) {
        let (Some(me), Some(reg)) = (
            self.me.upgrade(),
            self.registry.get().and_then(Weak::upgrade),
        ) else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("cantus-deadlock-report".into())
            .spawn(move || me.send_waiters_now(src, &reg));
        if let Err(e) = spawned {
            eprintln!(
                "cantus: locale {} could not list its waiters: {e}",
                self.here
            );
        }
    }

    fn send_waiters_now(self: Arc<Self>, dest: usize, reg: &Registry) {
        let lines = crate::sched::deadlock::waiter_lines(reg);
        let text = cut_to(lines.join("\n"), WAITERS_BYTES.min(self.max_payload()));
        if let Err(e) = self.send(
            dest,
            Network::Reply,
            Header::control(Control::Waiters, 0),
            text.as_bytes(),
        ) {
            eprintln!(
                "cantus: locale {} could not send its waiters: {e}",
                self.here
            );
        }
    }

    /// Locale 0: a locale's waiters arrived.
    pub(super) fn take_waiters(&self, src: usize, payload: &[u8]) {
        let text = String::from_utf8_lossy(payload);
        let lines = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        let mut c = self.control.lock().unwrap();
        c.waiters.push((src, lines));
        self.control_changed.notify_all();
    }

    /// Locale 0, once the job is known to be deadlocked: every other
    /// locale's waiters, by locale; a locale that does not answer in time
    /// is named as such.
    pub(super) fn gather_waiters(&self) -> Vec<(usize, Vec<String>)> {
        self.control.lock().unwrap().waiters.clear();
        for (dest, e) in self.tell_others(Network::Reply, Control::ListWaiters, 0) {
            eprintln!("cantus: could not ask locale {dest} for its waiters: {e}");
        }
        let others = self.locales - 1;
        let deadline = Instant::now() + WAITERS_TIMEOUT;
        let mut got = std::mem::take(
            &mut self
                .wait_control(Some(deadline), |c| c.waiters.len() >= others)
                .waiters,
        );
        for l in (0..self.locales).filter(|&d| d != self.here) {
            if !got.iter().any(|(src, _)| *src == l) {
                got.push((l, vec!["(did not send its waiters in time)".into()]));
            }
        }
        got.sort_by_key(|(l, _)| *l);
        got
    }
}

/// Locale 0 at shutdown, waiting for termination: runs a deadlock wave
/// once per grace period, and reports when two agree (a locale holds a
/// task that can never finish, so the job could never end).
pub(super) struct ShutdownWatch {
    grace: Option<Duration>,
    next: Instant,
    prev: StuckSample,
}

impl ShutdownWatch {
    pub(super) fn new(reg: &Registry) -> ShutdownWatch {
        let grace = reg.config.deadlock;
        ShutdownWatch {
            grace,
            next: Instant::now() + grace.unwrap_or_default(),
            prev: None,
        }
    }

    pub(super) fn check(&mut self, engine: &Engine, reg: &Registry) {
        let Some(grace) = self.grace else { return };
        if Instant::now() < self.next {
            return;
        }
        let now = engine.deadlock_wave();
        if now.is_some() && now == self.prev {
            crate::sched::deadlock::report(reg, grace);
        }
        self.prev = now;
        self.next = Instant::now() + grace;
    }
}

/// `text`, cut at a character boundary to at most `max` bytes with a note
/// saying so.
fn cut_to(mut text: String, max: usize) -> String {
    const NOTE: &str = "\n... (list cut: too long for one frame)";
    if text.len() <= max {
        return text;
    }
    let mut end = max.saturating_sub(NOTE.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(NOTE);
    text
}

#[cfg(test)]
mod tests {
    use super::cut_to;

    #[test]
    fn long_waiter_lists_are_cut_with_a_note() {
        assert_eq!(cut_to("short".into(), 100), "short");
        let cut = cut_to("é".repeat(100), 60);
        assert!(cut.len() <= 60, "{}", cut.len());
        assert!(cut.ends_with("(list cut: too long for one frame)"), "{cut}");
    }
}
