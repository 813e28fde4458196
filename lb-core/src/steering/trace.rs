//! The explanation a decision carries: one line per step, recorded only when asked for so the
//! DNS and proxy hot paths pay nothing.

#[derive(Debug, Default)]
pub(crate) struct Trace {
    steps: Option<Vec<String>>,
}

impl Trace {
    pub(crate) fn new(enabled: bool) -> Self {
        Trace {
            steps: enabled.then(Vec::new),
        }
    }

    /// Records a step; the closure runs only when explanations are on.
    pub(crate) fn note(&mut self, step: impl FnOnce() -> String) {
        if let Some(steps) = &mut self.steps {
            steps.push(step());
        }
    }

    pub(crate) fn into_steps(self) -> Vec<String> {
        self.steps.unwrap_or_default()
    }
}
