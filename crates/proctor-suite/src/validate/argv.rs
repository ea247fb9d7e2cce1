//! Whether each variant's agent can be handed its prompt: every agent but a scripted one gets
//! it on its command line (and a `command` or `human` agent in `PROCTOR_PROMPT` as well), and
//! Linux takes at most [`ONE_STRING_MAX`] bytes in any one argument or environment variable.
//! A prompt past it would validate and then leave every trial `errored` with "Argument list too
//! long", so it is refused here, naming the task, the variant and by how much it is over.

use crate::model::{AgentKind, Task, Variant, PROMPT_ENV};
use crate::problem::ProblemKind;

use super::Validator;

/// The most bytes one argument or `NAME=value` environment string may hold, its ending NUL
/// included: the kernel's `MAX_ARG_STRLEN`, 32 pages of 4 KiB.
pub const ONE_STRING_MAX: usize = 32 * 4096;

/// The longest string a variant's agent is handed that holds `prompt`, in bytes with its NUL:
/// the prompt as one argument, the `PROCTOR_PROMPT` string, or a `command` template argument
/// with `{prompt}` filled in. `None` for an agent that gets no command line (a scripted one).
pub fn longest_string(variant: &Variant, prompt: &str) -> Option<usize> {
    let env = PROMPT_ENV.len() + 1 + prompt.len() + 1;
    match variant.agent {
        // An ACP agent is handed its prompt over the protocol, not on its command line.
        AgentKind::Script | AgentKind::Acp => None,
        AgentKind::Command => {
            let template = variant.command.as_ref().map(|c| c.get_ref());
            let args = template.into_iter().flatten().map(|arg| {
                // `{workspace}` and `{model}` are short; `{prompt}` may appear more than once.
                let n = arg.matches("{prompt}").count();
                arg.len() - n * "{prompt}".len() + n * prompt.len() + 1
            });
            Some(args.fold(env, usize::max))
        }
        AgentKind::Human => Some(env),
        _ => Some(prompt.len() + 1),
    }
}

impl Validator<'_> {
    /// Every (task, variant) pair whose prompt the agent cannot be handed.
    pub(super) fn prompts_fit(&mut self) {
        let suite = self.suite;
        for variant in &suite.file.variants {
            // The first task over the limit speaks for the variant; the rest are counted.
            let over: Vec<(&Task, usize)> = suite
                .file
                .tasks
                .iter()
                .filter(|t| variant.runs_task(t.id.get_ref()))
                .filter_map(|t| {
                    let longest = longest_string(variant, &suite.prompt(t, variant))?;
                    (longest > ONE_STRING_MAX).then_some((t, longest))
                })
                .collect();
            let Some((task, longest)) = over.first() else {
                continue;
            };
            let more = match over.len() {
                1 => String::new(),
                n => format!(" (and {} more of its tasks)", n - 1),
            };
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    task.id.span(),
                    format!(
                        "the prompt variant `{}` gives task `{}`{more} cannot be handed to its agent: it makes a command-line argument or environment variable of {longest} bytes, and Linux takes at most {ONE_STRING_MAX} in one ({} over)",
                        variant.id.get_ref(),
                        task.id.get_ref(),
                        longest - ONE_STRING_MAX,
                    ),
                )
                .with_label("this task's prompt")
                .with_help(
                    "shorten the prompt (with the variant's prefix and suffix), or put the long part in a fixture file and have the prompt name it",
                );
            self.out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(toml_text: &str) -> Variant {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn the_longest_string_is_the_one_that_holds_the_prompt_most() {
        let p = "x".repeat(1000);
        let cli = variant("id = \"a\"\nagent = \"claude-code\"");
        assert_eq!(longest_string(&cli, &p), Some(1001));
        let cmd = variant(
            "id = \"b\"\nagent = \"command\"\ncommand = [\"run\", \"--p={prompt}{prompt}\"]",
        );
        assert_eq!(longest_string(&cmd, &p), Some("--p=".len() + 2000 + 1));
        let env_only = variant("id = \"c\"\nagent = \"command\"\ncommand = [\"run\"]");
        assert_eq!(
            longest_string(&env_only, &p),
            Some("PROCTOR_PROMPT=".len() + 1000 + 1)
        );
        let script = variant("id = \"d\"\nagent = \"script\"\nscript = \"s\"");
        assert_eq!(longest_string(&script, &p), None);
    }
}
