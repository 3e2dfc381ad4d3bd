"""The agent: a local Ollama model drives the detection tools in a ReAct loop.

Entry points: `pipeline.run_agent_inspection` (an inspection with the model and the guard),
`doctor.run_doctor` (what stands between this machine and a usable model), `trace.Trace`.
"""
