//! Containers: `Sequential` (chains forwards), `ModuleList` and `ModuleDict` (hold children
//! under index or key names, as PyTorch's do).

use crate::module::Module;
use magpie_core::{Error, Result, Tensor};

/// `nn.Sequential`: children named `"0"`, `"1"`, ...; forward feeds each output to the next.
#[derive(Default)]
pub struct Sequential {
    pub layers: Vec<Box<dyn Module>>,
}

impl Sequential {
    /// An empty chain.
    pub fn new() -> Sequential {
        Sequential::default()
    }
    /// Appends a layer (builder style).
    pub fn add(mut self, m: impl Module + 'static) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }
    /// Appends a boxed layer.
    pub fn push(&mut self, m: Box<dyn Module>) {
        self.layers.push(m);
    }
    /// The number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }
    /// True when it holds no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Module for Sequential {
    fn type_name(&self) -> &'static str {
        "Sequential"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for l in &self.layers {
            h = l.forward(&h)?;
        }
        Ok(h)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        self.layers.iter().enumerate().map(|(i, m)| (i.to_string(), m.as_ref())).collect()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        self.layers.iter_mut().enumerate().map(|(i, m)| (i.to_string(), m.as_mut() as &mut dyn Module)).collect()
    }
    fn child_slots_mut(&mut self) -> Vec<(String, &mut Box<dyn Module>)> {
        self.layers.iter_mut().enumerate().map(|(i, m)| (i.to_string(), m)).collect()
    }
}

/// `nn.ModuleList`: children named by index; it has no forward of its own.
pub struct ModuleList<M: Module + ?Sized = dyn Module> {
    pub items: Vec<Box<M>>,
}

impl<M: Module + ?Sized> Default for ModuleList<M> {
    fn default() -> Self {
        ModuleList { items: Vec::new() }
    }
}

impl<M: Module + ?Sized> ModuleList<M> {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends a module.
    pub fn push(&mut self, m: Box<M>) {
        self.items.push(m);
    }
    /// The i-th module.
    pub fn get(&self, i: usize) -> Option<&M> {
        self.items.get(i).map(|b| b.as_ref())
    }
    /// Iterates over the modules.
    pub fn iter(&self) -> impl Iterator<Item = &M> {
        self.items.iter().map(|b| b.as_ref())
    }
    /// The number of modules.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<M: Module + ?Sized> FromIterator<Box<M>> for ModuleList<M> {
    fn from_iter<I: IntoIterator<Item = Box<M>>>(it: I) -> Self {
        ModuleList { items: it.into_iter().collect() }
    }
}

/// Lets `ModuleList<T>` of a concrete module type list its items as `&dyn Module`.
pub trait AsDynModule {
    fn as_dyn_module(&self) -> &dyn Module;
    fn as_dyn_module_mut(&mut self) -> &mut dyn Module;
    /// The box itself when it holds a `dyn Module` (so it may be replaced by another type).
    fn dyn_slot(b: &mut Box<Self>) -> Option<&mut Box<dyn Module>>;
}
impl<M: Module> AsDynModule for M {
    fn as_dyn_module(&self) -> &dyn Module {
        self
    }
    fn as_dyn_module_mut(&mut self) -> &mut dyn Module {
        self
    }
    fn dyn_slot(_: &mut Box<Self>) -> Option<&mut Box<dyn Module>> {
        None
    }
}
impl AsDynModule for dyn Module {
    fn as_dyn_module(&self) -> &dyn Module {
        self
    }
    fn as_dyn_module_mut(&mut self) -> &mut dyn Module {
        self
    }
    fn dyn_slot(b: &mut Box<Self>) -> Option<&mut Box<dyn Module>> {
        Some(b)
    }
}

impl<M: Module + AsDynModule + ?Sized> Module for ModuleList<M> {
    fn type_name(&self) -> &'static str {
        "ModuleList"
    }
    fn forward(&self, _x: &Tensor) -> Result<Tensor> {
        Err(Error::value("ModuleList", "ModuleList has no forward; iterate over its modules"))
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        self.items.iter().enumerate().map(|(i, m)| (i.to_string(), m.as_dyn_module())).collect()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        self.items.iter_mut().enumerate().map(|(i, m)| (i.to_string(), m.as_dyn_module_mut())).collect()
    }
    fn child_slots_mut(&mut self) -> Vec<(String, &mut Box<dyn Module>)> {
        self.items.iter_mut().enumerate().filter_map(|(i, m)| M::dyn_slot(m).map(|s| (i.to_string(), s))).collect()
    }
}

/// `nn.ModuleDict`: children under string keys, in insertion order.
#[derive(Default)]
pub struct ModuleDict {
    pub items: Vec<(String, Box<dyn Module>)>,
}

impl ModuleDict {
    /// An empty dict.
    pub fn new() -> ModuleDict {
        ModuleDict::default()
    }
    /// Inserts or replaces `key` (a replaced module keeps its position, as in Python dicts).
    /// Keys may not contain `.` (they become part of parameter names).
    pub fn insert(&mut self, key: &str, m: Box<dyn Module>) -> Result<()> {
        if key.is_empty() || key.contains('.') {
            return Err(Error::value("ModuleDict", format!("module name can't contain \".\" or be empty, got: {key:?}")));
        }
        match self.items.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = m,
            None => self.items.push((key.to_string(), m)),
        }
        Ok(())
    }
    /// The module under `key`.
    pub fn get(&self, key: &str) -> Option<&dyn Module> {
        self.items.iter().find(|(k, _)| k == key).map(|(_, m)| m.as_ref())
    }
}

impl Module for ModuleDict {
    fn type_name(&self) -> &'static str {
        "ModuleDict"
    }
    fn forward(&self, _x: &Tensor) -> Result<Tensor> {
        Err(Error::value("ModuleDict", "ModuleDict has no forward; look up a module by key"))
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        self.items.iter().map(|(k, m)| (k.clone(), m.as_ref())).collect()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        self.items.iter_mut().map(|(k, m)| (k.clone(), m.as_mut() as &mut dyn Module)).collect()
    }
    fn child_slots_mut(&mut self) -> Vec<(String, &mut Box<dyn Module>)> {
        self.items.iter_mut().map(|(k, m)| (k.clone(), m)).collect()
    }
}
