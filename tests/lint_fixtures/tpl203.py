import torch

model = torch.nn.Linear(2, 2).cuda()  # expect: TPL203
x = torch.randn(2, 2).to("cuda:0")  # expect: TPL203
y = torch.zeros(2, device="cuda")  # expect: TPL203
dev = torch.device("cuda")  # expect: TPL203
legacy = torch.cuda.FloatTensor  # expect: TPL203
if args.cuda:
    model = model.cuda()  # near miss: under a condition
z = torch.zeros(2, device="cpu")  # near miss: the CPU
w = torch.zeros(2, device=dev)  # near miss: not a literal
