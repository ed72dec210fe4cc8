"""Shortlist: which environments can GRPO improve a model on? (see README.md)"""
import warnings

# tqdm.auto, which transformers imports, warns in a Jupyter kernel without ipywidgets that it cannot
# draw widget bars. Every progress bar is off in this project, so the warning only adds noise to
# each executed notebook; shortlist is imported before transformers in every notebook and process.
warnings.filterwarnings("ignore", message="IProgress not found")
