"""ToolDock on Docker Swarm (`tooldock swarm`): the stack file (stack.py), the state kept between runs
(state.py: the cluster CA, tokens, secret names), the images (images.py) and the engine calls (engine.py)."""
