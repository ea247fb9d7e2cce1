//! A person in the agent's seat (`proctor sit`): the command is the person's shell, on a
//! terminal; what they saw is the terminal's output, and their answer is asked for after the
//! full stop, so it never comes from the output.

use crate::{Adapter, AgentError, AgentOutput, Launch, LaunchContext};

/// Bytes of the terminal's text the transcript shows; `agent.stdout` keeps all of what was
/// captured.
const TRANSCRIPT_OUTPUT: usize = 1 << 20;

/// A person's shell.
#[derive(Debug, Clone)]
pub struct HumanAdapter {
    shell: Vec<String>,
}

impl HumanAdapter {
    /// An adapter that starts `shell` (its argv).
    pub fn new(shell: Vec<String>) -> HumanAdapter {
        HumanAdapter { shell }
    }
}

impl Adapter for HumanAdapter {
    fn launch(&self, ctx: &LaunchContext) -> Result<Launch, AgentError> {
        Ok(Launch {
            argv: self.shell.clone(),
            env: vec![(crate::PROMPT_ENV.into(), ctx.prompt.clone())],
            files: Vec::new(),
        })
    }

    /// The terminal's output (in `stdout`) as one transcript event of plain text; the answer is
    /// not in it (the runner is given it after the full stop).
    fn read(&self, stdout: &[u8], _stderr: &[u8]) -> AgentOutput {
        let text = plain_text(&String::from_utf8_lossy(stdout));
        let transcript = if text.is_empty() {
            Vec::new()
        } else {
            vec![serde_json::json!({
                "type": "terminal",
                "text": crate::cli::head_of(&text, TRANSCRIPT_OUTPUT),
            })]
        };
        AgentOutput {
            transcript,
            ..AgentOutput::default()
        }
    }
}

/// What a terminal showed, as plain text: escape sequences (colours, cursor moves, titles) and
/// carriage returns taken out.
pub fn plain_text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ESC \.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                // Any other escape is two characters long.
                _ => {}
            },
            '\r' | '\u{7}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_drops_escapes_and_carriage_returns() {
        assert_eq!(plain_text("$ ls\r\nfile\r\n"), "$ ls\nfile\n");
        assert_eq!(
            plain_text("\u{1b}[01;32muser\u{1b}[00m:\u{1b}[01;34m~\u{1b}[00m$ "),
            "user:~$ "
        );
        assert_eq!(plain_text("\u{1b}]0;title\u{7}$ x"), "$ x");
        assert_eq!(plain_text("\u{1b}]0;title\u{1b}\\$ x"), "$ x");
        assert_eq!(plain_text("a\u{1b}=b"), "ab");
        assert_eq!(plain_text("é ü\u{7}"), "é ü");
    }

    #[test]
    fn the_shell_is_launched_with_the_prompt_in_its_environment_and_no_answer_is_read() {
        let a = HumanAdapter::new(vec!["/bin/sh".into()]);
        let ctx = LaunchContext {
            prompt: "do it".into(),
            workspace: "/workspace".into(),
            model: None,
            proctor: "/run/proctor/bin/proctor".into(),
            agent_dir: "/run/proctor/agent".into(),
        };
        let l = a.launch(&ctx).unwrap();
        assert_eq!(l.argv, ["/bin/sh"]);
        assert_eq!(l.env, [("PROCTOR_PROMPT".to_string(), "do it".to_string())]);
        let out = a.read(b"$ chat read\r\nDone.\r\n", b"");
        assert_eq!(out.answer, "", "the answer is asked for, never read");
        assert_eq!(out.transcript[0]["text"], "$ chat read\nDone.\n");
        assert!(a.read(b"", b"").transcript.is_empty());
    }
}
