//! Asking several switches at once, each within one deadline: a thread
//! per switch, kept between polls with whatever connection it holds.
//!
//! A poll asks every idle thread and waits for the answers up to the
//! deadline, so a hung or slow switch costs the others at most the
//! timeout, and S switches cost a poll one round trip, not S. A thread
//! whose work outlived a poll is not asked again until it answered (its
//! late answer is thrown away), so a hung switch never queues requests
//! behind it.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

/// One switch's work for a poll, done by its deadline.
pub type Work<R> = Box<dyn FnMut(Instant) -> R + Send>;

/// Why a switch has no answer for a poll.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Missed {
    #[error("no answer within {0:?}")]
    Late(Duration),
    #[error("its previous poll is still not answered after {0:?}")]
    Busy(Duration),
    #[error("its thread is gone")]
    Gone,
}

/// What a thread is asked: a round number and when it must answer.
type Ask = (u64, Instant);
/// What it answers: its index, the round, and what it found.
type Answer<R> = (usize, u64, R);

/// The threads for a set of switches.
pub struct Fanout<R> {
    name: &'static str,
    timeout: Duration,
    /// The work of each switch, until the first poll starts the threads,
    /// so that their sockets live in the network namespace of the thread
    /// that polls.
    work: Vec<Work<R>>,
    count: usize,
    threads: Option<Threads<R>>,
    round: u64,
}

struct Threads<R> {
    asks: Vec<Sender<Ask>>,
    /// Whether each thread is still working on an earlier poll.
    busy: Vec<bool>,
    answers: Receiver<Answer<R>>,
}

impl<R: Send + 'static> Fanout<R> {
    /// Threads named `NAME-INDEX` doing `work`, one each; every poll ends
    /// within `timeout`.
    pub fn new(name: &'static str, work: Vec<Work<R>>, timeout: Duration) -> Self {
        Self {
            name,
            timeout,
            count: work.len(),
            work,
            threads: None,
            round: 0,
        }
    }

    /// Asks every switch; returns in at most the timeout, one result per
    /// switch in order.
    pub fn poll(&mut self) -> Vec<Result<R, Missed>> {
        let deadline = Instant::now() + self.timeout;
        self.round += 1;
        let round = self.round;
        let (name, work) = (self.name, &mut self.work);
        let threads = (self.threads).get_or_insert_with(|| Threads::start(name, work));
        // Late answers of earlier rounds free their threads.
        while let Ok((index, _, _)) = threads.answers.try_recv() {
            threads.busy[index] = false;
        }
        let mut results: Vec<Option<Result<R, Missed>>> = (0..self.count).map(|_| None).collect();
        let mut waiting = 0;
        for (index, ask) in threads.asks.iter().enumerate() {
            if threads.busy[index] {
                results[index] = Some(Err(Missed::Busy(self.timeout)));
            } else if ask.send((round, deadline)).is_ok() {
                threads.busy[index] = true;
                waiting += 1;
            } else {
                results[index] = Some(Err(Missed::Gone));
            }
        }
        while waiting > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match threads.answers.recv_timeout(left) {
                Ok((index, answered, result)) => {
                    threads.busy[index] = false;
                    if answered == round {
                        results[index] = Some(Ok(result));
                        waiting -= 1;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        let timeout = self.timeout;
        (results.into_iter())
            .map(|result| result.unwrap_or(Err(Missed::Late(timeout))))
            .collect()
    }
}

impl<R: Send + 'static> Threads<R> {
    fn start(name: &str, work: &mut Vec<Work<R>>) -> Self {
        let (answer, answers) = channel();
        let mut asks = Vec::new();
        for (index, mut work) in work.drain(..).enumerate() {
            let (ask, asked) = channel::<Ask>();
            let answer = answer.clone();
            // A thread that cannot start drops its receiver with the
            // closure: its switch then reads "thread is gone" each poll.
            let _ = std::thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || {
                    for (round, deadline) in asked {
                        if answer.send((index, round, work(deadline))).is_err() {
                            break;
                        }
                    }
                });
            asks.push(ask);
        }
        Self {
            busy: vec![false; asks.len()],
            asks,
            answers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fanout(delays_ms: &[u64], timeout_ms: u64) -> Fanout<usize> {
        let work = (delays_ms.iter().enumerate())
            .map(|(index, &delay)| {
                Box::new(move |_: Instant| {
                    std::thread::sleep(Duration::from_millis(delay));
                    index
                }) as Work<usize>
            })
            .collect();
        Fanout::new("test", work, Duration::from_millis(timeout_ms))
    }

    #[test]
    fn switches_answer_at_once_and_a_slow_one_misses_only_its_own() {
        // Three switches of 200 ms each answer in one poll of about 200 ms,
        // where one after another would take 600.
        let mut fan = fanout(&[200, 200, 200], 2000);
        let start = Instant::now();
        assert_eq!(fan.poll(), [Ok(0), Ok(1), Ok(2)]);
        let took = start.elapsed();
        assert!(took < Duration::from_millis(500), "{took:?}");
        // One of 2 s misses this poll and, still busy, the next.
        let mut fan = fanout(&[100, 100, 100, 2000], 400);
        let start = Instant::now();
        let polled = fan.poll();
        let took = start.elapsed();
        assert_eq!(polled[..3], [Ok(0), Ok(1), Ok(2)]);
        assert_eq!(polled[3], Err(Missed::Late(Duration::from_millis(400))));
        assert!(took >= Duration::from_millis(400), "{took:?}");
        assert!(took < Duration::from_millis(800), "{took:?}");
        let polled = fan.poll();
        assert_eq!(polled[..3], [Ok(0), Ok(1), Ok(2)]);
        assert_eq!(polled[3], Err(Missed::Busy(Duration::from_millis(400))));
        assert_eq!(
            Missed::Busy(Duration::from_millis(400)).to_string(),
            "its previous poll is still not answered after 400ms"
        );
    }
}
